#!/usr/bin/env bash
# fetch-sdist.sh [VERSION] — llama-cpp-python's source package (it vendors
# llama.cpp), kept once in ~/.cache/edgellm/sdist for the scripts that read it:
# fetch-llama-server-tests.sh (llama.cpp's server tests), llama-cpp-python.sh
# (the build) and tests/fixtures/make_fixtures.py (the vocabulary files).
# Prints the file's path. Downloads it from PyPI (pip download --no-binary)
# only when it is not there; when tests/data/reference/SHA256SUMS names the
# file, its sha256 must match (a mismatching download is removed). VERSION:
# $1, else EL_LLAMA_CPP_PYTHON, else 0.3.36. Exit 1 on failure, with why on
# stderr.
set -euo pipefail
VER=${1:-${EL_LLAMA_CPP_PYTHON:-0.3.36}}
DIR="$HOME/.cache/edgellm/sdist"
NAME="llama_cpp_python-$VER.tar.gz"
SUMS="$(cd "$(dirname "$0")/.." && pwd)/tests/data/reference/SHA256SUMS"
WANT=$(awk -v n="$NAME" '$1 == "sdist" && $2 == n { print $3 }' "$SUMS" 2>/dev/null || true)

if [ ! -f "$DIR/$NAME" ]; then
  mkdir -p "$DIR"
  tmp=$(mktemp -d "$DIR/.dl-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VER" -d "$tmp" >&2 ||
    { echo "fetch-sdist: pip download llama-cpp-python==$VER failed" >&2; exit 1; }
  [ -f "$tmp/$NAME" ] || { echo "fetch-sdist: no $NAME after pip download" >&2; exit 1; }
  mv "$tmp/$NAME" "$DIR/$NAME"
fi
if [ -n "$WANT" ]; then
  GOT=$(sha256sum "$DIR/$NAME" | cut -d' ' -f1)
  if [ "$GOT" != "$WANT" ]; then
    rm -f "$DIR/$NAME"
    echo "fetch-sdist: $NAME has sha256 $GOT, tests/data/reference/SHA256SUMS says $WANT" >&2
    exit 1
  fi
fi
echo "$DIR/$NAME"
