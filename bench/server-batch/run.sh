#!/bin/sh
# bench/server-batch/run.sh — batched decoding across server slots, side by
# side in one run (docs/PERFORMANCE.md, "Batched decoding"): aggregate
# tokens/s and p50/p95 inter-token latency with 1, 2, 4, 8 concurrent
# streams on 8 slots, for edgellm serve (batched, and --no-batch) and, if
# given, llama-server with the same slots, context per slot and threads.
#
# usage: bench/server-batch/run.sh EDGELLM MODEL.gguf [N_PREDICT] [REPS]
#   env LLAMA_SERVER=path/to/llama-server (native build; skipped if unset)
#       THREADS (default 2)  STREAMS (default 1,2,4,8)  SLOTS (default 8)
# Output: one JSON line per server and stream count (load.py).
set -eu
EL=$1 M=$2 N=${3:-64} REPS=${4:-2}
TH=${THREADS:-2} KS=${STREAMS:-1,2,4,8} NP=${SLOTS:-8}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
CTX=512   # per slot

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_health() {
  i=0
  until "$PY" -c "import http.client,sys; c=http.client.HTTPConnection('127.0.0.1',$1,timeout=2); c.request('GET','/health'); sys.exit(c.getresponse().status!=200)" 2>/dev/null; do
    i=$((i + 1)); [ "$i" -gt 600 ] && { echo "server on $1 did not come up" >&2; return 1; }
    sleep 0.2
  done
}
run_server() { # label, then the command (its port is $PORT)
  label=$1; shift
  "$@" >/dev/null 2>"/tmp/server-batch-$label.log" &
  pid=$!
  wait_health "$PORT" || { kill "$pid" 2>/dev/null; tail -5 "/tmp/server-batch-$label.log" >&2; return 1; }
  "$PY" "$HERE/load.py" "$PORT" "$label" "$KS" "$N" "$REPS" || true
  kill -INT "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
}

PORT=$(free_port)
run_server edgellm "$EL" serve -m "$M" --allow-unsigned --port "$PORT" -np "$NP" -c "$CTX" -t "$TH"   # -c: per slot
PORT=$(free_port)
run_server edgellm-no-batch "$EL" serve -m "$M" --allow-unsigned --port "$PORT" -np "$NP" -c "$CTX" -t "$TH" --no-batch
if [ -n "${LLAMA_SERVER:-}" ]; then
  PORT=$(free_port)
  # llama-server's -c is the total, split across -np slots; its default continuous batching (-cb) is on
  run_server llama-server "$LLAMA_SERVER" -m "$M" --port "$PORT" -np "$NP" -c $((CTX * NP)) -t "$TH" -tb "$TH"
else
  echo '{"server": "llama-server", "note": "LLAMA_SERVER not set: skipped"}'
fi
