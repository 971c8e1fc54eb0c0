#!/usr/bin/env bash
# Lists the tests that the last ctest run skipped, each with its reason (the
# GTEST_SKIP() message), read from ctest's Testing/Temporary/LastTest.log.
# `make test` calls it after ctest, whether or not ctest passed, so that CI
# shows what did not run here and why. Prints only; always exits 0.
# Usage: scripts/list-skipped-tests.sh [BUILD_DIR]   (default: build)
set -u
log="${1:-build}/Testing/Temporary/LastTest.log"
if [ ! -f "$log" ]; then
  echo "list-skipped-tests: no $log (ctest did not run there)" >&2
  exit 0
fi
# A ctest block starts with "N/M Test: NAME" and its output ends with
# "<end of output>". Inside, GoogleTest prints "FILE:LINE: Skipped", the
# message's lines, then "[  SKIPPED ] NAME".
awk '
  /^[0-9]+\/[0-9]+ Test: / { name = $0; sub(/^[0-9]+\/[0-9]+ Test: /, "", name); reason = ""; in_msg = 0; skipped = 0; next }
  /^\[  SKIPPED \] / { skipped = 1; in_msg = 0; next }
  in_msg { reason = reason (reason == "" ? "" : " ") $0; next }
  /: Skipped$/ { in_msg = 1; next }
  /^<end of output>$/ {
    if (skipped && name != "") { n++; lines[n] = "  " name ": " (reason == "" ? "(no reason given)" : reason) }
    name = ""; next
  }
  END {
    if (n == 0) { print "No test was skipped."; exit 0 }
    print "Skipped tests (" n "):"
    for (i = 1; i <= n; i++) print lines[i]
  }
' "$log"
exit 0
