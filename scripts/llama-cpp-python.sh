#!/usr/bin/env bash
# llama-cpp-python.sh — llama.cpp as a user gets it from PyPI: llama-cpp-python's
# source package compiled by pip into a virtual environment, cached; prints
# that environment's python on stdout.
#
# Used by `make test` (tests/pack/test_pack_llamacpp.py runs llama.cpp on
# edgellm's packs; tests/fixtures/make_fixtures.py quantizes the four tiny
# reference types edgellm's quantizer does not write: Q2_K, Q3_K_M, IQ4_NL,
# IQ4_XS) and by `make goldens` (scripts/make-goldens.sh, with its own
# CMAKE_ARGS and environment).
#
#   $1 / EL_LLAMA_VENV       the environment (default ~/.cache/edgellm/llama-cpp-python)
#   EL_LLAMA_CPP_PYTHON      version (default 0.3.36)
#   EL_LLAMA_CMAKE_ARGS      CMAKE_ARGS of the build (default "-DLLAVA_BUILD=OFF":
#                            the package's own build, -march=native, without
#                            the multimodal library nobody here loads)
#
# The environment sees the system's site packages (numpy, gguf). The build
# takes ~10 minutes on 2 cores; it is reused while the version, CMAKE_ARGS and
# the CPU's flags stay the same (a stamp file in the environment). Exit 1 on
# failure, with pip's output on stderr.
set -euo pipefail
VER=${EL_LLAMA_CPP_PYTHON:-0.3.36}
ARGS=${EL_LLAMA_CMAKE_ARGS--DLLAVA_BUILD=OFF}
VENV=${1:-${EL_LLAMA_VENV:-$HOME/.cache/edgellm/llama-cpp-python}}
JOBS=${JOBS:-$(nproc)}
CPU=$(grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-16)
WANT="$VER|$ARGS|$CPU"
STAMP="$VENV/.el-llama-cpp-python"

if [ -f "$STAMP" ] && [ "$(head -n1 "$STAMP")" = "$WANT" ] && [ -x "$VENV/bin/python" ] &&
   "$VENV/bin/python" -c "import llama_cpp" >/dev/null 2>&1; then
  echo "$VENV/bin/python"
  exit 0
fi

rm -rf "$VENV"
python3 -m venv --system-site-packages "$VENV" >&2
PY="$VENV/bin/python"
SDIST=$(bash "$(dirname "$0")/fetch-sdist.sh" "$VER")
echo "building llama-cpp-python $VER from $(basename "$SDIST") with CMAKE_ARGS='$ARGS' (minutes)" >&2
CMAKE_ARGS="$ARGS" CMAKE_BUILD_PARALLEL_LEVEL=$JOBS \
  "$PY" -m pip install -q --no-deps --no-binary llama-cpp-python "$SDIST" >&2
# what the Python binding imports besides llama.cpp itself (typing_extensions, diskcache, jinja2)
"$PY" -m pip install -q typing_extensions diskcache jinja2 >&2
"$PY" -c "import llama_cpp" >&2
SHA=$(sha256sum "$SDIST" | cut -d' ' -f1)
{ echo "$WANT"; echo "$(basename "$SDIST") $SHA"; } > "$STAMP"
echo "$PY"
