// The waits between a dropped source's reconnects (source_runner.h):
// base, 2*base, 4*base, ... up to cap; back to base after a healthy run, so
// a source that drops once a day reconnects at once and one that cannot
// connect asks every cap seconds, not in a tight loop. One runner thread.
#pragma once

#include <algorithm>

namespace corepool {

class Backoff {
 public:
  Backoff(double base_s, double cap_s) : base_s_(base_s), cap_s_(std::max(base_s, cap_s)) {}

  // The wait before the next attempt; each call doubles the one after it.
  double next() {
    const double wait = next_s_ > 0 ? next_s_ : base_s_;
    next_s_ = std::min(wait * 2, cap_s_);
    return wait;
  }
  // A run that was healthy: the next failure waits base_s again.
  void reset() { next_s_ = 0; }

 private:
  const double base_s_;
  const double cap_s_;
  double next_s_ = 0;  // 0: the next wait is base_s_
};

}  // namespace corepool
