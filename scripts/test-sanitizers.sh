#!/usr/bin/env bash
# `make test-long`: the code that never loads LibTorch, rebuilt with clang under
# sanitizers, plus bounded libFuzzer runs. Three steps, each its own build dir:
#   build-asan  ASan+UBSan (and libFuzzer coverage): unit tests, shm tests,
#               seed-corpus replays of every fuzz target (ctest)
#   build-tsan  TSan: the rings and shm blocks, and the HTTP server's loop
#               thread with responders answering from other threads
#   fuzzing     each target of tests/fuzz for FUZZ_SECONDS (two at a time),
#               failing on any crash, leak, timeout or sanitizer report
# Prints the executions per fuzz target. Env: FUZZ_SECONDS (60), JOBS (nproc),
# STEPS ("asan tsan fuzz").
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
JOBS=${JOBS:-$(nproc)}
STEPS=${STEPS:-asan tsan fuzz}
FUZZ_TARGETS=(http_fuzz websocket_fuzz audio_fuzz config_fuzz model_config_fuzz ring_descriptor_fuzz)
export CC=${SANITIZER_CC:-clang} CXX=${SANITIZER_CXX:-clang++}
# Any report is fatal, with a stack; leaks are reports too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Third-party leaks corepool cannot free, each explained in the file.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

command -v "$CXX" >/dev/null || { echo "test-sanitizers: $CXX not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }

configure() {  # configure DIR CMAKE_ARGS...
  local dir=$1
  shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
}

step_asan() {
  echo "== ASan+UBSan: unit tests, shm tests, fuzz seed corpora (build-asan)"
  configure build-asan -DCOREPOOL_SANITIZE=address,undefined -DCOREPOOL_FUZZ=ON
  cmake --build build-asan -j"$JOBS" -- --no-print-directory
  ctest --test-dir build-asan --output-on-failure -j"$JOBS"
}

step_tsan() {
  echo "== TSan: rings, shm blocks, HTTP server loop (build-tsan)"
  configure build-tsan -DCOREPOOL_SANITIZE=thread
  cmake --build build-tsan -j"$JOBS" --target corepool_shm_tests corepool_unit_tests -- --no-print-directory
  # The tests with more than one thread (or process) sharing memory; the rest
  # of the unit tests are single-threaded and already run under ASan.
  ctest --test-dir build-tsan --output-on-failure -j"$JOBS" \
    -R '^([A-Za-z]+/)?(RingTest|RingProcessTest|RingEchoTest|FutexTest|EventfdTest|SegmentTest|SweepTest|SlabLayoutTest|SlotPoolTest|DescriptorCheckTest|HttpServerTest|HttpCloseWatchTest|ModelStatisticsTest|NotifierTest)\.'
}

# run_fuzzer TARGET: FUZZ_SECONDS from the seed corpus; new inputs go to a
# scratch corpus in the build dir, never into the source tree.
run_fuzzer() {
  local t=$1 corpus=build-asan/fuzz-corpus/$1 log=build-asan/fuzz-logs/$1.log
  mkdir -p "$corpus" build-asan/fuzz-logs build-asan/fuzz-artifacts
  local max_len=8192
  [[ $t == audio_fuzz ]] && max_len=16384
  if build-asan/tests/fuzz/"$t" "$corpus" tests/fuzz/"$t" \
      -max_total_time="$FUZZ_SECONDS" -timeout=5 -rss_limit_mb=2048 -max_len=$max_len \
      -print_final_stats=1 -artifact_prefix=build-asan/fuzz-artifacts/"$t"- >"$log" 2>&1; then
    echo "$t ok"
  else
    echo "$t FAILED (exit $?)"
  fi
}

step_fuzz() {
  echo "== libFuzzer: ${FUZZ_SECONDS}s per target, two at a time (build-asan)"
  [[ -d build-asan/tests/fuzz ]] || { echo "test-sanitizers: run the asan step first" >&2; exit 1; }
  cmake --build build-asan -j"$JOBS" --target "${FUZZ_TARGETS[@]}" -- --no-print-directory
  rm -rf build-asan/fuzz-logs build-asan/fuzz-artifacts
  local results=build-asan/fuzz-results.txt
  printf '%s\n' "${FUZZ_TARGETS[@]}" | xargs -P 2 -I{} bash -c "$(declare -f run_fuzzer); FUZZ_SECONDS=$FUZZ_SECONDS run_fuzzer {}" \
    | tee "$results"
  echo "target                  executions  exec/s  coverage  corpus  (${FUZZ_SECONDS}s each; libFuzzer's 'Done N runs')"
  local failed=0
  for t in "${FUZZ_TARGETS[@]}"; do
    local log=build-asan/fuzz-logs/$t.log runs speed last cov corp
    runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *\([0-9]*\).*/\1/p' "$log" | tail -1)
    last=$(grep ' cov: ' "$log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
    printf '%-23s %11s %7s %9s %7s\n' "$t" "${runs:-?}" "${speed:-?}" "${cov:-?}" "${corp:-?}"
    if ! grep -q "^$t ok$" "$results"; then
      failed=1
      echo "---- $t: last lines of $log (artifacts in build-asan/fuzz-artifacts):"
      tail -40 "$log"
    fi
  done
  return $failed
}

for step in $STEPS; do
  "step_$step"
done
echo "test-sanitizers: all steps passed ($STEPS)"
