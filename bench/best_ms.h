// The best (shortest) wall time of `reps` calls of f, in milliseconds: the
// figure the single-layer benchmarks print (corepool-linear-bench,
// corepool-winograd-bench), least disturbed by other work on the host.
#pragma once

#include <algorithm>
#include <chrono>

namespace corepool {

template <class F>
double best_ms(F f, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
  }
  return best;
}

}  // namespace corepool
