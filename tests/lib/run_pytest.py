#!/usr/bin/env python3
"""run_pytest.py — ctest's entry to the Python package's tests (python/tests).

Runs pytest on python/tests with the package imported from the source tree
(PYTHONPATH=python) and the library from this build (EDGELLM_LIBRARY, set by
CMake), so no install is needed. Exit: pytest's status; 77 (skipped) when
pytest is not installed (scripts/install-deps.sh installs it).
"""
import os
import subprocess
import sys

src = os.environ["EL_SOURCE_DIR"]
try:
    import pytest  # noqa: F401
except ImportError:
    print("pytest not installed: skipped")
    sys.exit(77)
env = dict(os.environ)
env["PYTHONPATH"] = os.path.join(src, "python") + os.pathsep + env.get("PYTHONPATH", "")
r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(src, "python/tests")],
                   env=env)
sys.exit(r.returncode)
