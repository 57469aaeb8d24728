#!/usr/bin/env bash
# fetch-llama-server-tests.sh — puts llama.cpp's own server test suite
# (tools/server/tests: conftest.py, utils.py, unit/*.py) where
# tests/server/test_llama_suite.py looks for it, and the Python packages the
# suite imports (pytest, requests, wget, filelock, openai).
#
# The suite comes from PyPI, the legitimate way: llama-cpp-python's source
# package vendors llama.cpp, so scripts/fetch-sdist.sh keeps the sdist
# (llama-cpp-python 0.3.36: about 73 MiB, ~12 s to download here) in
# ~/.cache/edgellm/sdist, and only vendor/llama.cpp/tools/server/tests (about
# 430 KiB) is extracted. Nothing of it enters the repository.
#
# Destination: $1, else $EL_LLAMA_SERVER_TESTS, else
# ~/.cache/edgellm/llama-server-tests. Prints the destination on stdout.
# Does nothing when the suite is already there. Exit status 0 on success,
# 1 on failure (scripts/install-deps.sh only warns then).
set -euo pipefail
VERSION="${EL_LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
DEST="${1:-${EL_LLAMA_SERVER_TESTS:-$HOME/.cache/edgellm/llama-server-tests}}"

for mod in pytest requests wget filelock openai; do
  python3 -c "import $mod" >/dev/null 2>&1 || python3 -m pip install -q "$mod" >&2 ||
    { echo "fetch-llama-server-tests: pip install $mod failed" >&2; exit 1; }
done

if [ -f "$DEST/utils.py" ] && [ -f "$DEST/conftest.py" ] && [ -d "$DEST/unit" ]; then
  echo "$DEST"
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
sdist=$(bash "$(dirname "$0")/fetch-sdist.sh" "$VERSION") || exit 1
prefix="llama_cpp_python-$VERSION/vendor/llama.cpp/tools/server/tests"
mkdir "$tmp/x"
tar -xzf "$sdist" -C "$tmp/x" --no-same-owner --no-same-permissions --wildcards "$prefix/*" ||
  { echo "fetch-llama-server-tests: $sdist has no $prefix" >&2; exit 1; }
[ -f "$tmp/x/$prefix/utils.py" ] && [ -d "$tmp/x/$prefix/unit" ] ||
  { echo "fetch-llama-server-tests: $prefix lacks utils.py or unit/" >&2; exit 1; }
mkdir -p "$(dirname "$DEST")"
rm -rf "$DEST.part"
mv "$tmp/x/$prefix" "$DEST.part"
rm -rf "$DEST"
mv "$DEST.part" "$DEST"
echo "$DEST"
