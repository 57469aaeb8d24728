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
#   EL_GOLDENS_SET        fidelity (default: Gemma fidelity + the tiny models'
#                         long-prompt and short goldens) or bitlevel (the 3-prompt Gemma goldens edgellm
#                         matches bit for bit; the default CMAKE_ARGS rebuild
#                         them identically)
#   JOBS                  compile jobs (default 2)
#
# The build (scripts/llama-cpp-python.sh) takes ~10 minutes on 2 cores; it is
# reused while the version and CMAKE_ARGS stay the same (a stamp file in the
# venv). The tiny models' long-prompt goldens need the fixtures (`make fixtures`).
set -euo pipefail
cd "$(dirname "$0")/.."

VER=${EL_LLAMA_CPP_PYTHON:-0.3.36}
CMAKE_ARGS_GOLDENS=${EL_LLAMA_CMAKE_ARGS--DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON}
VENV=${EL_GOLDENS_VENV:-build-goldens/venv}
JOBS=${JOBS:-2}

PY=$(EL_LLAMA_CPP_PYTHON=$VER EL_LLAMA_CMAKE_ARGS=$CMAKE_ARGS_GOLDENS JOBS=$JOBS bash scripts/llama-cpp-python.sh "$VENV")
STAMP="$VENV/.el-llama-cpp-python"

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
FIXTURES=${EL_FIXTURE_DIR:-$HOME/.cache/edgellm/fixtures}
if [ "$SET" = fidelity ] && [ -d "$FIXTURES/reference/models" ] && [ -z "${EL_GOLDENS_NO_TINY:-}" ]; then
  "$PY" tests/tools/gen_tiny_goldens.py --ref "$FIXTURES/reference"
  "$PY" tests/tools/gen_tiny_goldens.py --short --ref "$FIXTURES/reference"
fi
