#!/usr/bin/env bash
# `make goldens`: builds llama.cpp the way a user gets it from PyPI's source
# package (llama-cpp-python, compiled here by pip) and writes the fidelity
# goldens of tests/data with the build recorded in them.
#
#   EL_LLAMA_CPP_PYTHON   version (default 0.3.36)
#   EL_LLAMA_CMAKE_ARGS   CMAKE_ARGS for the build (default: -DGGML_NATIVE=OFF
#                         with AVX-512 F/BW/DQ/VL/VBMI/VNNI/BF16, Zen 4's set:
#                         the arithmetic edgellm follows; needs an AVX-512 CPU
#                         to run). -DGGML_NATIVE=OFF alone: ggml's AVX2
#                         baseline; "" : llama-cpp-python's own -march=native.
#                         README "Parity with llama.cpp" says why it is pinned.
#   EL_GOLDENS_VENV       the virtual environment (default build-goldens/venv)
#   EL_GOLDENS_SET        fidelity (default: Gemma fidelity + tiny long-prompt
#                         goldens) or bitlevel (the 3-prompt Gemma goldens edgellm
#                         matches bit for bit; the default CMAKE_ARGS rebuild
#                         them identically)
#   JOBS                  compile jobs (default 2)
#
# The build takes ~10 minutes on 2 cores; it is reused while the version and
# CMAKE_ARGS stay the same (a stamp file in the venv).
set -euo pipefail
cd "$(dirname "$0")/.."

VER=${EL_LLAMA_CPP_PYTHON:-0.3.36}
CMAKE_ARGS_GOLDENS=${EL_LLAMA_CMAKE_ARGS--DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON}
VENV=${EL_GOLDENS_VENV:-build-goldens/venv}
JOBS=${JOBS:-2}

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
STAMP="$VENV/.el-llama-cpp-python"
WANT="$VER|$CMAKE_ARGS_GOLDENS"

if [ ! -f "$STAMP" ] || [ "$(head -n1 "$STAMP")" != "$WANT" ]; then
  "$PY" -m pip install -q --upgrade pip >&2
  "$PY" -m pip install -q numpy >&2
  DL="$VENV/sdist"
  rm -rf "$DL"
  "$PY" -m pip download -q --no-binary :all: --no-deps -d "$DL" "llama-cpp-python==$VER" >&2
  SDIST=$(ls "$DL"/llama_cpp_python-*.tar.gz)
  echo "building llama-cpp-python $VER from $(basename "$SDIST") with CMAKE_ARGS='$CMAKE_ARGS_GOLDENS' (minutes)" >&2
  CMAKE_ARGS="$CMAKE_ARGS_GOLDENS" CMAKE_BUILD_PARALLEL_LEVEL=$JOBS \
    "$PY" -m pip install --force-reinstall --no-deps --no-binary llama-cpp-python "$SDIST" >&2
  SHA=$(sha256sum "$SDIST" | cut -d' ' -f1)
  { echo "$WANT"; echo "$(basename "$SDIST") $SHA"; } > "$STAMP"
fi

SDIST_LINE=$(sed -n 2p "$STAMP")
export EL_GOLDENS_BUILD
EL_GOLDENS_BUILD=$("$PY" - "$CMAKE_ARGS_GOLDENS" "$SDIST_LINE" <<'EOF'
import json, subprocess, sys
cc = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()
name, sha = (sys.argv[2].split() + ["", ""])[:2]
print(json.dumps({"built_by": "scripts/make-goldens.sh (pip install --no-binary llama-cpp-python, from the sdist)",
                  "cmake_args": sys.argv[1], "sdist": name, "sdist_sha256": sha,
                  "compiler": cc[0] if cc else "?"}))
EOF
)

MODEL=${EL_GEMMA_MODEL:-$(bash scripts/fetch-model.sh)}
SET=${EL_GOLDENS_SET:-fidelity}
# llama.cpp threads sleep instead of spinning at barriers (same arithmetic; much faster on a busy machine)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
"$PY" tests/tools/gen_gemma_goldens.py --set "$SET" --model "$MODEL" "$@"
if [ "$SET" = fidelity ] && [ -d ../shared/reference/models ] && [ -z "${EL_GOLDENS_NO_TINY:-}" ]; then
  "$PY" tests/tools/gen_tiny_goldens.py
fi
