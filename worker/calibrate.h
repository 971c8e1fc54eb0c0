// engine.max_batch = 0: the batch size measured, not guessed. A short
// calibration times the (optimized) forward() at 1, 2, 4, 8 and 16 items and
// keeps the lowest cost per item; a batch within 5% of the best counts as a
// tie and the smaller one wins (less latency for the same throughput; why 5 %:
// calibrate.cc). Called
// once per executor factory, before any worker forks (one thread, as a worker).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker/model/model.h"

namespace corepool {

struct Calibration {
  int best = 1;                                  // the batch size chosen
  std::vector<std::pair<int, double>> ms_per_item;  // batch -> best ms per item, in the order timed
  double seconds = 0;                            // time the calibration took
  std::string text() const;                      // "1: 14.1 ms, 2: 13.2 ms, 4: 13.3 ms (chose 2)"
};

// Times batches 1, 2, 4, ... up to `limit` (at most 16) with
// interleaved_best_ms; stops early rather than overrun `budget_seconds`.
// Throws what forward() throws.
Calibration calibrate_batch(const std::shared_ptr<const LoadedModel>& model, int limit,
                            double budget_seconds = 1.0);

// The timing alone, for tests: `time_forward(batch)` runs one forward() of
// `batch` items and returns its seconds, and the sum of what it returned is
// the clock `budget_seconds` is held to. Each size is warmed and timed once
// (1, 2, 4, ... up to `limit`, at most 16, while two calls of the next fit in
// what is left), then the sizes are timed in turn, round after round, for
// about 50 ms per size. Returns batch -> best ms per item, smallest first.
std::vector<std::pair<int, double>> interleaved_best_ms(int limit, double budget_seconds,
                                                        const std::function<double(int)>& time_forward);

// The tie rule alone, for tests: the smallest batch within 5% of the lowest cost.
int pick_batch(const std::vector<std::pair<int, double>>& ms_per_item);

}  // namespace corepool
