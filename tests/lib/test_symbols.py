#!/usr/bin/env python3
"""test_symbols.py — the shared library exports exactly the public API.

Contract: every function declared in include/edgellm.h is a defined dynamic
symbol of libedgellm.so, and every defined dynamic symbol (functions and data,
any binding, IFUNCs included) is a function the header declares; the SONAME is
libedgellm.so.<EL_ABI_VERSION>. Reads the header itself (not the build's
version script), so a leak fails here whatever the build does.
Usage: test_symbols.py LIBEDGELLM_SO HEADER    (exit 0 ok, 1 failure, 77 skip)
"""
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


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    so, header = sys.argv[1], sys.argv[2]
    if not shutil.which("nm") or not shutil.which("readelf"):
        print("nm/readelf not found (binutils): skipped")
        return 77
    hdr = open(header, encoding="utf-8").read()
    want = declared(hdr)
    abi = re.search(r"#define EL_ABI_VERSION (\d+)", hdr).group(1)
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
        print(f"FAIL: exported but not declared in {header}: {', '.join(extra)}")
        fails += 1
    if missing:
        print(f"FAIL: declared in the header but not exported: {', '.join(missing)}")
        fails += 1
    dyn = subprocess.run(["readelf", "-d", so], capture_output=True, text=True, check=True).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dyn)
    soname = m.group(1) if m else None
    if soname != f"libedgellm.so.{abi}":
        print(f"FAIL: SONAME {soname}, want libedgellm.so.{abi}")
        fails += 1
    print(f"test_symbols: {len(exported)} exported, {len(want)} declared, SONAME {soname}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
