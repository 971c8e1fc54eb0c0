// Each batch size: one forward() to warm it (oneDNN builds its primitives for
// a new shape on first use) and one timed; then the sizes are timed again in
// turn (1, 2, 4, ..., 1, 2, 4, ...) for about 50 ms per size. The fastest call
// of each size counts (the minimum is what the CPU can do; noise only adds),
// and taking the sizes in turn spreads a burst of host noise over one call of
// each instead of every call of one size (timed one size after the other, a
// burst once measured CNN10's batch 4 at 14.6 ms per item, where it runs at
// about 10, and batch 1 was chosen). The forwards run in an EngineArena, as an
// engine's do: on jemalloc's own arenas a batch whose activations pass 8 MiB
// was handed back and faulted in again on every call, so CNN10's batch 8 ran
// 7-16 % slower than 4 when sustained while a few calls put them level
// (engine_arena.h; bench/RESULTS.md, the AMX Xeon sections).
#include "worker/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "worker/engine.h"
#include "worker/host/engine_arena.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;

// Timed forwards per batch size in the rounds after the first call: enough
// for the minimum of a small model's many calls to settle.
constexpr double kTimedSeconds = 0.05;
constexpr int kMaxRounds = 1000;  // a clock that returns 0 still ends

// A larger batch must cost at least 5 % less per item than a smaller one to
// be chosen over it: doubling the batch doubles each request's latency, and
// a few percent in forward() alone did not show in the pipeline. At 654abe9
// CNN10 chose batch 16 for 3.7 % less per item than 8: thread mode gave 2.30x
// `plain` at a p50 latency of 295 ms, where batch 8 gave 2.23-2.28x at
// 144-158 ms (bench/RESULTS.md, the AMX Xeon, the next session).
constexpr double kTieMargin = 0.05;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<std::pair<int, double>> to_ms_per_item(const std::vector<std::pair<int, double>>& seconds) {
  std::vector<std::pair<int, double>> out;
  for (const auto& [batch, s] : seconds) out.emplace_back(batch, s * 1e3 / batch);
  return out;
}

}  // namespace

int pick_batch(const std::vector<std::pair<int, double>>& ms_per_item) {
  double best = 0;
  for (const auto& [batch, ms] : ms_per_item) best = (best == 0 || ms < best) ? ms : best;
  int chosen = 0;
  for (const auto& [batch, ms] : ms_per_item) {
    if (ms <= best * (1 + kTieMargin) && (chosen == 0 || batch < chosen)) chosen = batch;
  }
  return std::max(chosen, 1);
}

std::string Calibration::text() const {
  std::string s;
  char buf[64];
  for (const auto& [batch, ms] : ms_per_item) {
    std::snprintf(buf, sizeof buf, "%s%d: %.3g ms", s.empty() ? "" : ", ", batch, ms);
    s += buf;
  }
  return s + " per item (chose " + std::to_string(best) + ")";
}

std::vector<std::pair<int, double>> interleaved_best_ms(int limit, double budget_seconds,
                                                        const std::function<double(int)>& time_forward) {
  std::vector<std::pair<int, double>> best;  // batch -> best seconds of one call
  double spent = 0;
  auto timed = [&](int batch) {
    const double t = time_forward(batch);
    spent += t;
    return t;
  };
  for (int batch = 1; batch <= std::min(limit, 16); batch *= 2) {
    if (!best.empty()) {
      const double last_per_item = best.back().second / best.back().first;
      if (2 * last_per_item * batch > budget_seconds - spent) break;  // its warm-up and one call must fit
    }
    timed(batch);  // the warm-up
    best.emplace_back(batch, timed(batch));
  }
  const double rounds_until = spent + kTimedSeconds * static_cast<double>(best.size());
  for (int round = 0; round < kMaxRounds && spent < rounds_until; ++round) {
    for (auto& [batch, seconds] : best) {
      if (spent + seconds > budget_seconds) return to_ms_per_item(best);
      seconds = std::min(seconds, timed(batch));
    }
  }
  return to_ms_per_item(best);
}

Calibration calibrate_batch(const std::shared_ptr<const LoadedModel>& model, int limit, double budget_seconds) {
  const auto started = Clock::now();
  const EngineArena arena;  // timed as an engine thread allocates (engine_arena.h)
  Engine engine(model);
  std::map<int, torch::Tensor> inputs;
  Calibration c;
  c.ms_per_item = interleaved_best_ms(limit, budget_seconds, [&](int batch) {
    torch::Tensor& input = inputs[batch];
    if (!input.defined()) {
      std::vector<int64_t> shape = model->config.item_shape();
      shape.insert(shape.begin(), batch);
      input = torch::randn(shape);
    }
    const auto t = Clock::now();
    engine.forward(input);
    return seconds_since(t);
  });
  c.best = pick_batch(c.ms_per_item);
  c.seconds = seconds_since(started);
  return c;
}

}  // namespace corepool
