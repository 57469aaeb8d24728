#!/usr/bin/env bash
# Records a telemetry / audit / route-explain session for docs/ROUTING.md: a
# cloud (`edgellm serve` on loopback) and a device (`edgellm serve --policy
# --cloud-url --thermal-source --telemetry-dir --audit-log -t 2`) on the tiny
# llama reference model; a few requests, a thermal change, then what was
# written (the telemetry spool, the audit log), `route explain` replaying
# the audit lines and explaining a request file, and `run --route`.
# Usage: tests/tools/telemetry_session.sh [build/edgellm] [fixture dir]
set -euo pipefail
# shellcheck source=route_session_lib.sh
. "$(dirname "$0")/route_session_lib.sh"
start_session demo-2026-12-02 '' 18481 18482 -t 2 --telemetry-dir "$T/telemetry" --audit-log "$T/audit.jsonl"

ask() { # ask '{"edgellm":...}' [header]
  local body
  body=$(jq -c --argjson m "$1" -n '{messages:[{role:"user",content:"My secret is 1234. Tell me about the sea."}],max_tokens:8,temperature:0} + $m')
  echo "\$ curl .../v1/chat/completions ${2:+-H '$2' }-d '$body'"
  curl -s -D "$T/h" -o "$T/b" localhost:18482/v1/chat/completions -H 'Content-Type: application/json' ${2:+-H "$2"} -d "$body"
  echo "HTTP $(head -1 "$T/h" | cut -d' ' -f2)  $(grep -i '^x-edgellm-route' "$T/h" | tr -d '\r')"
}
ask '{"edgellm":{"data_class":"public"}}'
ask '{}' 'X-Data-Class: medical-records'
echo 90000 > "$T/temp"; sleep 0.5
echo "\$ echo 90000 > sensor   # /health thermal: $(curl -s localhost:18482/health | jq -c '.thermal | {level, threads_active, threads_total}')"
ask '{"edgellm":{"data_class":"public"}}'
ask '{"edgellm":{"data_class":"private"}}'
echo 40000 > "$T/temp"; sleep 0.5
echo "\$ echo 40000 > sensor   # /health thermal: $(curl -s localhost:18482/health | jq -c '.thermal | {level, threads_active, threads_total}')"
kill -INT $EDGE_PID; wait $EDGE_PID || true
echo
echo "\$ cat telemetry/telemetry.jsonl"
cat "$T/telemetry/telemetry.jsonl"
echo
echo "\$ cat audit.jsonl"
cat "$T/audit.jsonl"
echo
n=$(wc -l < "$T/audit.jsonl")
for i in $(seq "$n"); do
  echo "\$ edgellm route explain --audit-log audit.jsonl --line $i --policy policy.json | tail -1"
  "$CLI" route explain --audit-log "$T/audit.jsonl" --line "$i" --policy "$T/policy.json" | tail -1
done
echo
echo '{"messages":[{"role":"user","content":"hi"}],"max_tokens":64,"edgellm":{"data_class":"ask","consent":true}}' > "$T/req.json"
echo '{"thermal":"hot","thermal_factor":0,"battery_percent":35,"discharging":true}' > "$T/state.json"
echo "\$ cat req.json state.json"; cat "$T/req.json" "$T/state.json"
echo "\$ edgellm route explain req.json --policy policy.json --state state.json"
"$CLI" route explain "$T/req.json" --policy "$T/policy.json" --state "$T/state.json"
echo
echo "\$ edgellm run -m MODEL -p 'Once upon a time' -n 8 --temp 0 --route --policy policy.json --cloud-url .../v1 --thermal-source sensor(90 C) --data-class public"
echo 90000 > "$T/temp"
"$CLI" run -m "$MODEL" --allow-unsigned -p 'Once upon a time' -n 8 --temp 0 --route --policy "$T/policy.json" \
  --cloud-url http://127.0.0.1:18481/v1 --thermal-source "$T/temp" --data-class public 2>&1 | grep -v '^UNSIGNED'
echo "\$ ... --data-class private; echo \$?"
set +e
"$CLI" run -m "$MODEL" --allow-unsigned -p 'Once upon a time' -n 8 --temp 0 --route --policy "$T/policy.json" \
  --cloud-url http://127.0.0.1:18481/v1 --thermal-source "$T/temp" --data-class private 2>&1 | grep -v '^UNSIGNED'
echo "${PIPESTATUS[0]}"
