// Each batch size: one forward() to warm it (oneDNN builds its primitives for
// a new shape on first use) and one timed; then rounds time every size once
// each, the first size of a round turning with the round (1, 2, 4; 2, 4, 1;
// ...), so that a burst of host noise falls on one call of several sizes and
// no size always runs right after another. The median of each size's calls
// counts, and the calibration ends when the choice is certain (calibrate.h).
//
// Why medians and rounds until the choice holds: with the fastest call of
// each size over a fixed 50 ms per size, two consecutive starts of the same
// command on a 2-vCPU AMD EPYC chose batch 2 (19.5 ms per item at 2, 18.7 at
// 4) and batch 4 (14.5 ms): a single lucky call decided, and a different
// batch meant a different speed for the whole run. A median over rounds is
// what a sustained run sees.
//
// The forwards run in an EngineArena, as an engine's do: on jemalloc's own
// arenas a batch whose activations pass 8 MiB was handed back and faulted in
// again on every call, so CNN10's batch 8 ran 7-16 % slower than 4 when
// sustained while a few calls put them level (engine_arena.h; bench/RESULTS.md,
// the AMX Xeon sections).
#include "worker/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <atomic>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "worker/engine.h"
#include "worker/host/engine_arena.h"
#include "worker/runtime.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;

// Rounds before a choice may be made, and rounds in a row it must then be
// certain (certain_choice) and the same.
constexpr int kMinRounds = 5;
constexpr int kStableRounds = 3;
constexpr int kMaxRounds = 400;  // a clock that returns 0 still ends

// A larger batch must cost at least 3 % less per item than a smaller one to be
// chosen over it: doubling the batch doubles each request's latency, and at
// 654abe9 CNN10 chose batch 16 for 3.7 % less per item than 8 (thread mode
// 2.30x `plain` at a p50 latency of 295 ms, against 2.23-2.28x at 144-158 ms
// with 8: bench/RESULTS.md, the AMX Xeon). 3 %, not more: the plan must
// choose a batch within 3 % of the best measured throughput (issue 37), and a
// tie margin wider than that would give it away by rule.
constexpr double kTieMargin = 0.03;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Per size: every timed call's ms per item, in the order timed.
struct Samples {
  int batch = 1;
  std::vector<double> ms_per_item;
};

// The standard error of a median: 1.253 sigma / sqrt(n), sigma from the
// median absolute deviation (x 1.4826 for a normal spread), which a burst of
// host noise on a few calls does not inflate: with the interquartile range,
// three doubled calls of 14 made batch 1 (10 ms per item) look as likely as
// batch 8 (6 ms) to be the cheapest.
double median_error(const std::vector<double>& v, double median) {
  std::vector<double> deviations;
  for (double x : v) deviations.push_back(std::abs(x - median));
  const double sigma = 1.4826 * quantile(deviations, 0.5);
  return 1.253 * sigma / std::sqrt(static_cast<double>(v.size()));
}

// Two medians told apart: their gap is at least two standard errors of it.
bool apart(const BatchCost& a, const BatchCost& b) {
  return std::abs(a.ms_per_item - b.ms_per_item) >= 2 * std::hypot(a.error, b.error);
}

// The choice is certain when every other size is either close to it (within
// the tie margin: either would do) or clearly apart from it (two standard
// errors of the difference of medians): no more rounds would change a choice
// that matters.
bool certain_choice(const std::vector<BatchCost>& costs, int pick) {
  size_t p = 0;
  while (costs[p].batch != pick) ++p;
  for (size_t i = 0; i < costs.size(); ++i) {
    const bool close = std::abs(costs[i].ms_per_item - costs[p].ms_per_item) <= kTieMargin * costs[p].ms_per_item;
    if (i != p && !close && !apart(costs[i], costs[p])) return false;
  }
  return true;
}

std::vector<BatchCost> summarize(const std::vector<Samples>& samples) {
  std::vector<BatchCost> costs;
  for (const auto& s : samples) {
    const double median = quantile(s.ms_per_item, 0.5);
    const double iqr = quantile(s.ms_per_item, 0.75) - quantile(s.ms_per_item, 0.25);
    const double spread = median > 0 ? iqr / 2 / median : 0;
    costs.push_back({s.batch, median, spread, median_error(s.ms_per_item, median)});
  }
  return costs;
}

}  // namespace

// Why a larger batch must also be told apart: on a 2-vCPU AMD EPYC Zen 5 the
// calibration saw CNN10's batch 16 0-5 % cheaper per item than 8, often
// within the rounds' spread, and the starts split between the two
// (bench/RESULTS.md, issue 37 item 3). A gap the rounds cannot resolve is no
// reason to double every request's latency.
int pick_batch(const std::vector<BatchCost>& costs) {
  const BatchCost* best = nullptr;
  for (const auto& c : costs) best = (!best || c.ms_per_item < best->ms_per_item) ? &c : best;
  int chosen = 0;
  for (const auto& c : costs) {
    const bool tie = c.ms_per_item <= best->ms_per_item * (1 + kTieMargin) || !apart(c, *best);
    if (tie && (chosen == 0 || c.batch < chosen)) chosen = c.batch;
  }
  return std::max(chosen, 1);
}

std::string Calibration::text() const {
  std::string s;
  for (const auto& c : costs) {
    s += fmt::format("{}{}: {:.3g} ms ±{:.0f}%", s.empty() ? "" : ", ", c.batch, c.ms_per_item, c.spread * 100);
  }
  return s + fmt::format(" per item, medians of {} round{}{}{} (chose {})", rounds, rounds == 1 ? "" : "s",
                         engines > 1 ? fmt::format(" with {} engines busy", engines) : "",
                         settled ? "" : ", budget spent before the choice was certain", best);
}

BatchTimings interleaved_medians(int limit, double budget_seconds, const std::function<double(int)>& time_forward) {
  std::vector<Samples> samples;
  double spent = 0;
  auto timed = [&](int batch) {
    const double t = time_forward(batch);
    spent += t;
    return t;
  };
  auto record = [&](Samples& s) { s.ms_per_item.push_back(timed(s.batch) * 1e3 / s.batch); };
  for (int batch = 1; batch <= std::min(limit, 16); batch *= 2) {
    if (!samples.empty()) {
      const Samples& last = samples.back();
      const double last_per_item = last.ms_per_item.back() / 1e3;
      if (2 * last_per_item * batch > budget_seconds - spent) break;  // its warm-up and one call must fit
    }
    timed(batch);  // the warm-up
    samples.push_back({batch, {}});
    record(samples.back());
  }
  BatchTimings out;
  int held = 0, last_pick = 0;
  for (int round = 0; round < kMaxRounds; ++round) {
    double round_cost = 0;  // the next round's cost, from the medians so far
    for (const auto& c : summarize(samples)) round_cost += c.ms_per_item * c.batch / 1e3;
    if (spent + round_cost > budget_seconds) break;
    for (size_t i = 0; i < samples.size(); ++i) record(samples[(round + i) % samples.size()]);
    out.rounds = round + 1;
    const std::vector<BatchCost> costs = summarize(samples);
    const int pick = pick_batch(costs);
    held = pick == last_pick && certain_choice(costs, pick) ? held + 1 : 0;
    last_pick = pick;
    if (out.rounds >= kMinRounds && held >= kStableRounds) {
      out.settled = true;
      break;
    }
  }
  out.costs = summarize(samples);
  return out;
}

namespace {

// One calibration engine's inputs: random items, one tensor per batch size.
struct Inputs {
  const LoadedModel& model;
  std::map<int, torch::Tensor> by_batch;
  const torch::Tensor& of(int batch) {
    torch::Tensor& input = by_batch[batch];
    if (!input.defined()) {
      std::vector<int64_t> shape = model.config.item_shape();
      shape.insert(shape.begin(), batch);
      input = torch::randn(shape);
    }
    return input;
  }
};

// The other engines of a run, busy while one is timed: each thread runs
// forward() at whatever size is being timed until told to stop. Why: with
// one engine timed alone, CNN10's batch 16 measured 1-4 % cheaper per item
// than 8 on a 2-vCPU AMD EPYC Zen 5, and process mode then sustained 4.7 %
// less with 16 than with 8 (bench/RESULTS.md, issue 37 item 3): two engines
// share the L3 and memory bandwidth, and larger batches feel it more.
class BusyEngines {
 public:
  BusyEngines(const std::shared_ptr<const LoadedModel>& model, int count) {
    for (int i = 0; i < count; ++i) {
      threads_.emplace_back([this, model] {
        configure_engine_thread();  // as an engine thread runs
        const EngineArena arena;
        Engine engine(model);
        Inputs inputs{*model, {}};
        for (int batch; (batch = batch_.load()) > 0;) engine.forward(inputs.of(batch));
      });
    }
  }
  ~BusyEngines() {
    batch_.store(0);
    for (auto& t : threads_) t.join();
  }
  void set_batch(int batch) { batch_.store(batch); }

 private:
  std::atomic<int> batch_{1};
  std::vector<std::thread> threads_;
};

}  // namespace

Calibration calibrate_batch(const std::shared_ptr<const LoadedModel>& model, int limit, double budget_seconds,
                            int engines) {
  const auto started = Clock::now();
  const EngineArena arena;  // timed as an engine thread allocates (engine_arena.h)
  Engine engine(model);
  Inputs inputs{*model, {}};
  BusyEngines others(model, std::max(0, engines - 1));
  const BatchTimings t = interleaved_medians(limit, budget_seconds, [&](int batch) {
    const torch::Tensor& input = inputs.of(batch);
    others.set_batch(batch);
    const auto start = Clock::now();
    engine.forward(input);
    return seconds_since(start);
  });
  Calibration c;
  c.costs = t.costs;
  c.rounds = t.rounds;
  c.settled = t.settled;
  c.best = pick_batch(c.costs);
  c.engines = std::max(1, engines);
  c.seconds = seconds_since(started);
  return c;
}

}  // namespace corepool
