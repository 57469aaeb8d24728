"""conftest.py — what python/tests' modules share. pytest loads it before them
and puts this folder on sys.path, so they import it: `from conftest import …`.

Contract:
  - SHARED: the fixture root ($EL_FIXTURE_DIR, default
    ~/.cache/edgellm/fixtures, written by `make fixtures`); CLI: $EL_CLI_PATH
    (the edgellm binary) or None;
  - need_fixture(path): path when it exists; else the test is skipped, or
    fails under CI=true (where no fixture may be missing);
  - check_struct_layout(source, module): compiles the C program `source`
    against include/ (it prints "TYPE SIZE" and "TYPE.FIELD OFFSET" lines),
    asserts each size / offset equals that of module's ctypes mirror, returns
    how many lines were compared; skipped without a C compiler.
"""
import ctypes
import os
import shutil
import subprocess
import tempfile

import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures"))
import fixtures  # noqa: E402  (tests/fixtures/fixtures.py)

SHARED = fixtures.fixture_dir()
UNDER_CI = fixtures.under_ci()  # a missing fixture fails there
CLI = os.environ.get("EL_CLI_PATH")


def need_fixture(path):
    if not os.path.exists(path):
        (pytest.fail if UNDER_CI else pytest.skip)(f"fixture {path} not found (make fixtures)")
    return path


def check_struct_layout(source, module):
    cc = shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler")
    include = os.path.join(os.path.dirname(__file__), "../../include")
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "l.c"), os.path.join(d, "l")
        open(src, "w").write(source)
        subprocess.run([cc, "-std=c17", "-I", include, src, "-o", exe], check=True)
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    n = 0
    for line in out.splitlines():
        name, size = line.split()
        if "." in name:
            t, f = name.split(".")
            got = getattr(getattr(module, t), f).offset
        else:
            got = ctypes.sizeof(getattr(module, name))
        assert got == int(size), f"{name}: ctypes {got}, C {size}"
        n += 1
    return n
