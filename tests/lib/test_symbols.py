#!/usr/bin/env python3
"""test_symbols.py — each shared library exports exactly its public API.

Contract: for each (LIBRARY, HEADER) pair — libedgellm.so with
include/edgellm.h, libedgellm-package.so with include/edgellm_package.h —
every function declared in the header is a defined dynamic symbol of the
library, and every defined dynamic symbol (functions and data, any binding,
IFUNCs included) is a function the header declares; the SONAME is
lib<name>.so.<ABI>, the ABI number being the header's first
"#define ..._ABI_VERSION N". Reads the header itself (not the build's version
script), so a leak fails here whatever the build does.
Usage: test_symbols.py LIB_SO HEADER [LIB_SO HEADER ...]   (exit 0 ok, 1 failure, 77 skip)
"""
import os
import re
import shutil
import subprocess
import sys


def declared(header_text):
    # drop comments, then find "name(" of every declaration at file scope
    text = re.sub(r"/\*.*?\*/", "", header_text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
    names = set()
    for stmt in text.split(";"):
        s = " ".join(stmt.split())
        s = s.split("{")[-1].split("}")[-1].strip()  # the last declaration in a chunk
        if s.startswith("typedef"):
            continue
        m = re.search(r"\b(el_[a-z0-9_]+)\s*\(", s)
        if m:
            names.add(m.group(1))
    return names


def check_library(so, header):
    hdr = open(header, encoding="utf-8").read()
    want = declared(hdr)
    abi = re.search(r"#define EL_[A-Z_]*ABI_VERSION (\d+)", hdr).group(1)
    base = os.path.basename(os.path.realpath(so)).split(".so")[0] + ".so"
    out = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True, check=True).stdout
    exported = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        kind, name = parts[1], parts[2].split("@")[0]
        if kind == "A":  # the version node (EDGELLM_<abi>), not a symbol
            continue
        exported.add(name)
    fails = 0
    extra = sorted(exported - want)
    missing = sorted(want - exported)
    if extra:
        print(f"FAIL: {base}: exported but not declared in {header}: {', '.join(extra)}")
        fails += 1
    if missing:
        print(f"FAIL: {base}: declared in the header but not exported: {', '.join(missing)}")
        fails += 1
    if not want:
        print(f"FAIL: {header} declares no function (the parser found none)")
        fails += 1
    dyn = subprocess.run(["readelf", "-d", so], capture_output=True, text=True, check=True).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dyn)
    soname = m.group(1) if m else None
    if soname != f"{base}.{abi}":
        print(f"FAIL: SONAME {soname}, want {base}.{abi}")
        fails += 1
    print(f"test_symbols: {base}: {len(exported)} exported, {len(want)} declared, SONAME {soname}")
    return fails


def main():
    if len(sys.argv) < 3 or len(sys.argv) % 2 != 1:
        print(__doc__)
        return 2
    if not shutil.which("nm") or not shutil.which("readelf"):
        print("nm/readelf not found (binutils): skipped")
        return 77
    fails = 0
    for i in range(1, len(sys.argv), 2):
        fails += check_library(sys.argv[i], sys.argv[i + 1])
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
