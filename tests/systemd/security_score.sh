#!/usr/bin/env bash
# ctest: prints `systemd-analyze security --offline=true` for the service, its
# table and overall exposure score (0 = best, 10 = worst), and fails if the
# score is over MAX. Usage: security_score.sh SYSTEMD_ANALYZE UNIT_FILE MAX
set -uo pipefail
analyze=$1 unit=$2 max=$3
# --threshold takes tenths (the exposure is kept as 0..100 internally).
threshold=$(awk -v m="$max" 'BEGIN { printf "%d", m * 10 + 0.5 }')
out=$("$analyze" security --offline=true --threshold="$threshold" "$unit" 2>&1)
rc=$?
printf '%s\n' "$out"
score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")
if [[ -z "$score" ]]; then
  echo "FAIL: no exposure score in the output (exit $rc)"
  exit 1
fi
echo "exposure score: $score (allowed: at most $max)"
if [[ $rc -ne 0 ]]; then
  echo "FAIL: exposure $score is over $max"
  exit 1
fi
