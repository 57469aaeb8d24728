# route_session_lib.sh — sourced (never run) by routing_session.sh and
# telemetry_session.sh, the recorded sessions of docs/ROUTING.md.
#
# Contract: sourced with the caller's arguments in $1/$2 ([build/edgellm]
# [fixture dir]), under `set -euo pipefail`; sets CLI, MODEL (the tiny llama
# reference model) and T (a temporary folder removed on exit, with the
# servers killed). start_session VERSION POLICY_TAIL CLOUD_PORT EDGE_PORT
# [EDGE FLAGS...] writes $T/policy.json (the demo classes private / ask /
# public and thermal settings, version VERSION, POLICY_TAIL appended inside
# the object: "" or ', "member": …'), the sensor $T/temp at 45 C, starts the
# cloud (`edgellm serve` on CLOUD_PORT, stderr $T/cloud.log, pid CLOUD_PID)
# and the device (`serve --policy --cloud-url --thermal-source` and EDGE
# FLAGS on EDGE_PORT, stderr $T/edge.log, pid EDGE_PID), and returns once
# both answer /health (or after 10 s each).
CLI=${1:-build/edgellm}
SHARED=${2:-${EL_FIXTURE_DIR:-$HOME/.cache/edgellm/fixtures}}
MODEL=$SHARED/reference/models/tiny-llama-Q4_K_M.gguf
T=$(mktemp -d)
trap 'kill $CLOUD_PID $EDGE_PID 2>/dev/null || true; rm -rf "$T"' EXIT

start_session() {
  local version=$1 tail=$2 cloud=$3 edge=$4
  shift 4
  cat > "$T/policy.json" <<JSON
{"format": "edgellm-policy/1", "version": "$version",
 "classes": {"private": {"cloud": "never"},
             "ask": {"cloud": "with_consent", "legal_basis": "consent"},
             "public": {"cloud": "allowed", "legal_basis": "contract"}},
 "thermal": {"derate_c": 70, "hot_c": 85, "hysteresis_c": 5, "sample_ms": 100, "max_tokens_derated": 4}$tail}
JSON
  echo 45000 > "$T/temp"
  "$CLI" serve -m "$MODEL" --allow-unsigned --port "$cloud" -c 256 2>"$T/cloud.log" & CLOUD_PID=$!
  "$CLI" serve -m "$MODEL" --allow-unsigned --port "$edge" -c 256 --policy "$T/policy.json" \
    --cloud-url "http://127.0.0.1:$cloud/v1" --thermal-source "$T/temp" "$@" 2>"$T/edge.log" & EDGE_PID=$!
  for p in "$cloud" "$edge"; do for _ in $(seq 100); do curl -sf "localhost:$p/health" >/dev/null && break; sleep 0.1; done; done
}
