// Test hooks: the only places where corepool's behaviour depends on a
// COREPOOL_TEST_* environment variable. Each exists so that a test can make a
// real worker process fail the way production ones do (a crash on one input,
// a leak, a slow boot, a preemption at the worst moment) and watch the
// supervisor cope, end to end. Read once per worker process; never set them
// in production (nothing in the package or the docs does).
#pragma once

#include <chrono>
#include <cstdlib>
#include <thread>

namespace corepool::test_hooks {

// COREPOOL_TEST_CRASH_ON_MARKER: a worker raises SIGSEGV on an input whose
// first two samples are kCrashMarker[0], kCrashMarker[1] (the poison request
// of the crash-loop tests).
inline bool crash_on_marker() { return std::getenv("COREPOOL_TEST_CRASH_ON_MARKER") != nullptr; }
constexpr float kCrashMarker[2] = {12345.0f, -12345.0f};

// COREPOOL_TEST_GROW_MB_PER_SEGMENT=N: a worker's memory grows by N MiB of
// touched pages per segment, as a leak in a model or a library would, so that
// engine.max_rss_mb can be tested end to end. 0 when unset.
inline int grow_mb_per_segment() {
  const char* value = std::getenv("COREPOOL_TEST_GROW_MB_PER_SEGMENT");
  return value ? std::atoi(value) : 0;
}

// COREPOOL_TEST_BOOT_DELAY_MS: a slow boot, as when eight workers each load a
// private copy on two cpus. COREPOOL_TEST_STALL_AFTER_READY_MS: a worker
// preempted right after it signalled ready. Sleeps that long, or not at all;
// with COREPOOL_TEST_PAUSE_SLOT=N only the worker in slot N does.
enum class Pause { kBootDelay, kStallAfterReady };
inline void pause(Pause which, int slot) {
  const char* only = std::getenv("COREPOOL_TEST_PAUSE_SLOT");
  if (only && std::atoi(only) != slot) return;
  const char* name =
      which == Pause::kBootDelay ? "COREPOOL_TEST_BOOT_DELAY_MS" : "COREPOOL_TEST_STALL_AFTER_READY_MS";
  if (const char* ms = std::getenv(name)) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
}

}  // namespace corepool::test_hooks
