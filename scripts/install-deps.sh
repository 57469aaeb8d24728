#!/usr/bin/env bash
# install-deps.sh [run|test] — installs what edgellm needs on a fresh Debian machine.
#
#   run   what building and running need (`make run`, `make chat`):
#         Debian: compiler, CMake, pkg-config, PCRE2 (the core library),
#         cJSON, libmicrohttpd, libsodium, libcurl (the CLI's server, package
#         verification and cloud route), the OpenCL ICD loader and headers (the
#         OpenCL backend is built against them and used where a GPU driver is
#         installed). PyPI: nothing here (scripts/fetch-model.sh installs the
#         model's packages).
#   test  all of `run`, and what the tests need (`make test`):
#         Debian: clang (fuzz targets), chromium + chromium-driver (the chat
#         page test), gcc-aarch64-linux-gnu + libc6-dev-arm64-cross + qemu-user
#         (tools/check-neon: the AArch64 NEON kernels under emulation),
#         python3-venv (tests that make virtual environments), pocl-opencl-icd
#         (an OpenCL driver on the CPU, so the OpenCL backend really runs here).
#         PyPI: numpy + gguf (fixtures, golden tools), tokenizers (tests/pack), openai + selenium +
#         jsonschema + pytest (server and Python tests), matplotlib
#         (bench/vs-llamacpp --plot), llama.cpp's server test suite and the
#         packages it imports (scripts/fetch-llama-server-tests.sh).
#         llama-cpp-python built from its source package and the fixtures are
#         separate `make test` steps (scripts/llama-cpp-python.sh, `make fixtures`).
#
# Installs only what is missing; apt-get update runs only then. Output is
# apt's and pip's own: `make` sends it to build/logs/ and shows it on failure.
# Exit status non-zero when an install fails.
set -euo pipefail
PROFILE=${1:-test}
case "$PROFILE" in run|test) ;; *) echo "usage: install-deps.sh [run|test]" >&2; exit 2 ;; esac

APT_RUN=(build-essential cmake pkg-config libpcre2-dev libcjson-dev libmicrohttpd-dev libsodium-dev
         libcurl4-openssl-dev ocl-icd-opencl-dev opencl-headers libpng-dev python3)
APT_TEST=(clang chromium chromium-driver gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user python3-venv
          pocl-opencl-icd)
PIP_TEST=(numpy gguf tokenizers openai selenium pytest jsonschema matplotlib)

want=("${APT_RUN[@]}")
[ "$PROFILE" = test ] && want+=("${APT_TEST[@]}")
need_apt=()
for pkg in "${want[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "apt: installing ${need_apt[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need_apt[@]}"
else
  echo "apt: nothing to install"
fi

[ "$PROFILE" = run ] && exit 0
[ "${EL_SKIP_PIP:-0}" = "1" ] && exit 0
python3 -m pip --version >/dev/null
for mod in "${PIP_TEST[@]}"; do
  if python3 -c "import $mod" >/dev/null 2>&1; then continue; fi
  echo "pip: installing $mod"
  python3 -m pip install "$mod"
done
# llama.cpp's own server test suite (from llama-cpp-python's sdist on PyPI) and the packages it
# imports: tests/server/test_llama_suite.py runs part of it against `edgellm serve`
if [ "${EL_SKIP_LLAMA_SUITE:-0}" != "1" ]; then
  bash "$(dirname "$0")/fetch-llama-server-tests.sh"
fi
