#!/usr/bin/env bash
# Records a routing session for docs/ROUTING.md: a cloud (`edgellm serve` on
# loopback) and a device (`edgellm serve --policy --cloud-url
# --thermal-source`) on the tiny llama reference model; a series of requests
# with their route (header + the body's "edgellm".route) as the device state
# changes. Usage: tests/tools/routing_session.sh [build/edgellm] [fixture dir]
set -euo pipefail
# shellcheck source=route_session_lib.sh
. "$(dirname "$0")/route_session_lib.sh"
start_session demo-2026-12-01 ', "cloud": {"down_for_s": 30, "timeout_s": 10}' 18471 18472

ask() { # ask 'what' '{"edgellm":...}' [max_tokens]
  local body
  body=$(jq -c --argjson m "$2" --argjson n "${3:-8}" -n \
    '{messages:[{role:"user",content:"Tell me about the sea."}],max_tokens:$n,temperature:0} + $m')
  echo "\$ # $1"
  echo "\$ curl .../v1/chat/completions -d '$(echo "$body" | jq -c '{edgellm, max_tokens}' )'"
  curl -s -D "$T/h" -o "$T/b" localhost:18472/v1/chat/completions -H 'Content-Type: application/json' -d "$body"
  echo "HTTP $(head -1 "$T/h" | cut -d' ' -f2)  $(grep -i '^x-edgellm-route' "$T/h" | tr -d '\r')"
  jq -c '{route: .edgellm.route, error: (.error.code // null),
          completion_tokens: (.usage.completion_tokens // null)}' "$T/b"
  echo
}
temp() { echo "$1" > "$T/temp"; sleep 0.4; echo "\$ echo $1 > sensor   # thermal: $(curl -s localhost:18472/health | jq -c '.thermal | {level, temp_c, factor, admitted_slots}')"; echo; }

ask "no data class: the strictest (private), local" '{}'
ask "public, device cool: local preferred" '{"edgellm":{"data_class":"public"}}'
ask "a class the policy does not know: declined, never the cloud" '{"edgellm":{"data_class":"medical"}}'
temp 75000
ask "derated: output capped" '{"edgellm":{"data_class":"public"}}' 12
temp 67000
temp 64000
temp 90000
ask "hot, public: the cloud (legal basis: contract)" '{"edgellm":{"data_class":"public"}}'
ask "hot, private: declined, the data stays here" '{"edgellm":{"data_class":"private"}}'
ask "hot, ask without consent: declined" '{"edgellm":{"data_class":"ask"}}'
ask "hot, ask with consent: the cloud" '{"edgellm":{"data_class":"ask","consent":true}}'
temp 40000
ask "cool again, a deadline below the local estimate: the cloud" '{"edgellm":{"data_class":"public","deadline_ms":0.5}}'
kill $CLOUD_PID; wait $CLOUD_PID 2>/dev/null || true
echo "\$ kill <cloud>"; echo
ask "deadline again, the cloud killed: typed failure, nothing ran locally" '{"edgellm":{"data_class":"public","deadline_ms":0.5}}'
ask "the cloud is marked down: local, and the detail says why" '{"edgellm":{"data_class":"public","deadline_ms":0.5}}'
echo "\$ curl .../health | jq .route"
curl -s localhost:18472/health | jq -c .route
