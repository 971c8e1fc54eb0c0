// The one wait of the tests: poll a predicate until it holds or a deadline
// passes. Only for events nothing can notify a test of (another process's
// exit or state, a /proc entry, a counter another thread bumps): the poll
// interval bounds how late the event is noticed; it orders nothing.
#pragma once

#include <time.h>

#include <chrono>
#include <functional>

namespace corepool::testing {

using Clock = std::chrono::steady_clock;

inline Clock::time_point after(std::chrono::milliseconds timeout) { return Clock::now() + timeout; }

// Returns the predicate's last value: true once it held, false at the deadline.
inline bool wait_until(const std::function<bool()>& done, Clock::time_point deadline) {
  while (!done()) {
    if (Clock::now() >= deadline) return done();
    const timespec pause{0, 1000000};  // 1 ms
    ::nanosleep(&pause, nullptr);
  }
  return true;
}

inline bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  return wait_until(done, after(timeout));
}

}  // namespace corepool::testing
