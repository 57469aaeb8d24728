#!/usr/bin/env bash
# step.sh LABEL LOG CMD [ARG...] — one quiet step of `make`: runs CMD with its
# stdout and stderr appended to LOG and prints one line, "LABEL ... 12 s"; on
# failure, the last 60 lines of LOG, its path, and CMD's exit status as its own.
set -uo pipefail
label=$1 log=$2
shift 2
mkdir -p "$(dirname "$log")"
printf '%s ... ' "$label"
start=$(date +%s.%N)
{ echo "==== $(date -u +%FT%TZ) $label: $*"; } >>"$log"
"$@" >>"$log" 2>&1
rc=$?
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
if [ $rc -eq 0 ]; then
  echo "$secs s"
else
  echo "FAILED after $secs s (exit $rc); the end of $log:"
  tail -n 60 "$log" | sed 's/^/  | /'
fi
exit $rc
