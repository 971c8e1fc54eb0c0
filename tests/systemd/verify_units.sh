#!/usr/bin/env bash
# ctest: `systemd-analyze verify` on our four units. Fails on a nonzero exit
# (e.g. ExecStart not executable, a missing Sockets= unit) and also on any
# message naming one of our units: verify exits 0 after "Unknown key ...,
# ignoring" and similar warnings, so its output is the real verdict.
# Usage: verify_units.sh SYSTEMD_ANALYZE UNIT_DIR
set -uo pipefail
analyze=$1 dir=$2
units=("$dir/corepool.service" "$dir/corepool.socket" "$dir/corepool-unix.socket" "$dir/corepool-grpc.socket")
out=$("$analyze" verify "${units[@]}" 2>&1)
rc=$?
[[ -n "$out" ]] && printf '%s\n' "$out"
if [[ $rc -ne 0 ]]; then
  echo "FAIL: systemd-analyze verify exited with $rc"
  exit 1
fi
if grep -q -e corepool <<<"$out"; then
  echo "FAIL: systemd-analyze verify warned about our units (above)"
  exit 1
fi
echo "OK: ${units[*]} verify cleanly"
