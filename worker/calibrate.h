// engine.max_batch = 0: the batch size measured, not guessed. The calibration
// times the (optimized) forward() at 1, 2, 4, 8 and 16 items, in turn, round
// after round, until the choice has held for several rounds (or a budget is
// spent), and keeps the lowest median cost per item; a batch within 3 % of the
// best, or not told apart from it by the rounds' spread, counts as a tie and
// the smaller one wins (less latency for the same throughput; why: calibrate.cc). Called once per executor factory, before
// any worker forks (one thread, as a worker); its result is kept in the plan
// cache (plan_cache.h) so that later starts skip it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker/model/model.h"

namespace corepool {

// What the timing of one batch size found.
struct BatchCost {
  int batch = 1;
  double ms_per_item = 0;  // the median over the rounds
  double spread = 0;       // half the interquartile range, as a fraction of the median
  double error = 0;        // the median's standard error, ms (0 when unknown: a cached plan, a test)
};

// The rounds alone: every size's median cost, how many rounds ran, whether
// the choice was certain (interleaved_medians; else the budget or the round
// cap ended it).
struct BatchTimings {
  std::vector<BatchCost> costs;  // smallest batch first
  int rounds = 0;
  bool settled = false;
};

struct Calibration {
  int best = 1;                   // the batch size chosen
  std::vector<BatchCost> costs;   // batch -> median ms per item and spread, smallest first
  int rounds = 0;
  bool settled = false;
  int engines = 1;                // engines busy while it timed (calibrate_batch)
  double seconds = 0;             // time the calibration took (when it ran in this process)
  // "1: 14.1 ms ±2%, 2: 13.2 ms ±1%, ... per item, medians of 9 rounds (chose 2)"
  std::string text() const;
};

// Times batches 1, 2, 4, ... up to `limit` (at most 16) with
// interleaved_medians; stops early rather than overrun `budget_seconds`.
// With `engines` > 1, engines - 1 more threads run forward() at the size
// being timed the whole time, so that the timed engine shares the caches and
// memory bandwidth as it will in the run (the timing is of one engine's calls).
// Throws what forward() throws.
Calibration calibrate_batch(const std::shared_ptr<const LoadedModel>& model, int limit,
                            double budget_seconds = 4.0, int engines = 1);

// The timing alone, for tests: `time_forward(batch)` runs one forward() of
// `batch` items and returns its seconds, and the sum of what it returned is
// the clock `budget_seconds` is held to. Each size is warmed and timed once
// (1, 2, 4, ... up to `limit`, at most 16, while two calls of the next fit in
// what is left); then rounds time each size once, the starting size turning
// with the round, until at least kMinRounds ran and pick_batch() on the
// medians made the same choice, and a certain one, kStableRounds rounds in a
// row: every other size either within the tie margin of it (either would do)
// or apart from it by two standard errors of the difference of their medians.
// Else it ends when the next round would not fit the budget.
BatchTimings interleaved_medians(int limit, double budget_seconds, const std::function<double(int)>& time_forward);

// The tie rule alone, for tests: the smallest batch within 3 % of the lowest
// cost, or not told apart from it by two standard errors of the difference of
// their medians (a larger batch must be shown to be better, not just measured so).
int pick_batch(const std::vector<BatchCost>& costs);

}  // namespace corepool
