#!/bin/sh
# bench/spec-draft/run.sh — speculative decoding with a draft model, side by
# side in one run (docs/PERFORMANCE.md, "Draft model"): edgellm plain decode,
# edgellm --draft-model with the controller and with a fixed γ, alternated
# REPS times; then (if given) llama.cpp's llama-speculative-simple on the same
# files and llama.cpp plain decode through llama-cpp-python.
#
# usage: bench/spec-draft/run.sh EDGELLM TARGET.gguf DRAFT.gguf [REPS] [N]
#   env LLAMA_SPEC=path/to/llama-speculative-simple  LLAMA_PY=path/to/python (llama-cpp-python)
#   THREADS (default 2)
# Output: one JSON line per edgellm run (run --json's final object, labelled),
# llama.cpp's summary lines.
set -eu
EL=$1 T=$2 D=$3 REPS=${4:-2} N=${5:-128}
TH=${THREADS:-2}
P="Write a short story about a lighthouse keeper who finds a message in a bottle."
i=0
while [ "$i" -lt "$REPS" ]; do
  for mode in plain draft draft-fixed4; do
    case $mode in
      plain) extra="" ;;
      draft) extra="-md $D" ;;
      draft-fixed4) extra="-md $D --spec-fixed --draft-max 4" ;;
    esac
    printf '%s rep %d: ' "$mode" "$i"
    # shellcheck disable=SC2086
    "$EL" run -m "$T" --allow-unsigned $extra -p "$P" -n "$N" --temp 0 --ignore-eos -t "$TH" -c 1024 --json 2>/dev/null | tail -1
  done
  i=$((i + 1))
done
if [ -n "${LLAMA_SPEC:-}" ]; then
  echo "llama.cpp llama-speculative-simple (draft-simple, n_max 8):"
  "$LLAMA_SPEC" -m "$T" -md "$D" --spec-type draft-simple -p "$P" -n "$N" --temp 0 -t "$TH" -td "$TH" \
    --spec-draft-n-max 8 -c 1024 2>&1 >/dev/null | grep -E "decoded|n_drafted|n_accept|accept  " || true
fi
if [ -n "${LLAMA_PY:-}" ]; then
  echo "llama.cpp plain decode (llama-cpp-python):"
  "$LLAMA_PY" - "$T" "$P" "$N" "$TH" <<'PY'
import sys, time
from llama_cpp import Llama
m = Llama(model_path=sys.argv[1], n_ctx=1024, n_threads=int(sys.argv[4]), verbose=False)
t = time.time(); r = m.create_completion(sys.argv[2], max_tokens=int(sys.argv[3]), temperature=0.0); dt = time.time() - t
u = r["usage"]; print(f"generated {u['completion_tokens']} tokens in {dt:.2f} s (prompt included): {u['completion_tokens']/dt:.2f} tok/s")
PY
fi
