// Each batch size: one forward() to warm it (oneDNN builds its primitives for
// a new shape on first use), then timed forwards for about 50 ms; the
// fastest one counts (the minimum is what the CPU can do; noise only adds).
#include "worker/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "worker/engine.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;

// Timed forwards per batch size, after the warm-up: enough for the minimum of
// a small model's many calls to settle, and for one call of a large model.
constexpr double kTimedSeconds = 0.05;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double time_forward(Engine& engine, const torch::Tensor& input) {
  const auto t = Clock::now();
  engine.forward(input);
  return seconds_since(t);
}

}  // namespace

int pick_batch(const std::vector<std::pair<int, double>>& ms_per_item) {
  double best = 0;
  for (const auto& [batch, ms] : ms_per_item) best = (best == 0 || ms < best) ? ms : best;
  int chosen = 0;
  for (const auto& [batch, ms] : ms_per_item) {
    if (ms <= best * 1.02 && (chosen == 0 || batch < chosen)) chosen = batch;
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

Calibration calibrate_batch(const std::shared_ptr<const LoadedModel>& model, int limit, double budget_seconds) {
  const auto started = Clock::now();
  Engine engine(model);
  Calibration c;
  double last_ms = 0;
  for (int batch = 1; batch <= std::min(limit, 16); batch *= 2) {
    const double left = budget_seconds - seconds_since(started);
    if (batch > 1 && 2 * last_ms * batch / 1e3 > left) break;
    std::vector<int64_t> shape = model->config.item_shape();
    shape.insert(shape.begin(), batch);
    const torch::Tensor input = torch::randn(shape);
    time_forward(engine, input);  // the warm-up
    double best = 1e300;
    const auto t = Clock::now();
    do {
      best = std::min(best, time_forward(engine, input));
    } while (seconds_since(t) < kTimedSeconds && seconds_since(started) < budget_seconds);
    last_ms = best * 1e3 / batch;
    c.ms_per_item.emplace_back(batch, last_ms);
  }
  c.best = pick_batch(c.ms_per_item);
  c.seconds = seconds_since(started);
  return c;
}

}  // namespace corepool
