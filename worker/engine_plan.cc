// The two decisions in order: the optimized module first, so that the
// calibration times the module the engines will run.
#include "worker/engine_plan.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "worker/plan_cache.h"
#include "worker/runtime.h"

namespace corepool {

std::string EnginePlan::text() const {
  std::string s = stateful.empty() ? "" : stateful + "; ";
  s += "optimize " + optimize.applied;
  if (!optimize.fallback.empty()) s += " (asked for " + optimize.requested + ")";
  if (optimize.applied != "none") {
    // The kernel path in use, and what engine.kernels asked for when that was the CPU's choice.
    s += ", kernels " + optimize.kernels + (optimize.kernels_requested == "auto" ? " (auto)" : "");
    s += fmt::format(" in {:.2f} s, max |score difference| {:.2g}", optimize.seconds, optimize.max_difference);
  }
  if (optimize.winograd_layers > 0) {
    s += fmt::format(", {} convolutions as Winograd", optimize.winograd_layers);
    if (optimize.direct_blocked_layers > 0) s += fmt::format(" after {} direct", optimize.direct_blocked_layers);
    s += fmt::format(" (items per call {})", fmt::join(optimize.winograd_chunks, ","));
  }
  if (optimize.own_winograd_layers > 0) {
    s += fmt::format(", {} convolutions as corepool's Winograd F(4x4,3x3)", optimize.own_winograd_layers);
    if (optimize.own_pooled_layers > 0) s += fmt::format(" ({} with their 2x2 pool)", optimize.own_pooled_layers);
  }
  if (optimize.linear_layers > 0) {
    s += fmt::format(", {} linear layer{} on prepacked weights", optimize.linear_layers,
                     optimize.linear_layers == 1 ? "" : "s");
  }
  if (optimize.shared_bytes > 0) {
    s += fmt::format(", {:.1f} MB shared read-only in {}", optimize.shared_bytes / 1e6,
                     optimize.huge_pages ? "huge pages" : "4 KiB pages (no transparent huge pages)");
  }
  s += "; max_batch " + std::to_string(max_batch);
  if (!measured) {
    s += " (configured)";
  } else if (cached) {
    s += fmt::format(" from the plan cache (measured {} in {:.2f} s): {}", planned_at, calibration.seconds,
                     calibration.text());
  } else {
    s += fmt::format(" measured in {:.2f} s: {}", calibration.seconds, calibration.text());
  }
  return s;
}

std::string stateful_text(const ModelConfig& config) {
  if (!config.is_stateful()) return "";
  const StatefulSpec& s = config.stateful;
  std::string shape;
  for (const int64_t d : s.state_shape) shape += (shape.empty() ? "" : ", ") + (d == 0 ? std::string("B") : std::to_string(d));
  std::string text = fmt::format("stateful model: method {}, chunk {} + context {} samples, state [{}]",
                                 s.method.empty() ? "forward" : s.method + ".forward", s.chunk_samples,
                                 s.context_samples, shape);
  if (s.split.enabled()) {
    text += fmt::format("; split: front {} ({} features a chunk), sequence {} (up to {} chunks a call)", s.split.front,
                        s.split.feature_floats, s.split.sequence, s.split.sequence_chunks);
  }
  return text;
}

namespace {

// The cached plan for this request, or nullopt (and the info line that says
// this start measures). A key that cannot be made (an unreadable model file)
// leaves the cache alone: loading the model reports that better.
std::optional<CachedPlan> cached_plan(const LoadedModel& model, const PlanRequest& request, const PlanKey& key) {
  if (request.replan) {
    spdlog::info("planning {}: --replan, measuring anew (plan cache {})", model.dir, request.cache_dir);
    return std::nullopt;
  }
  std::string why;
  auto cached = read_plan(request.cache_dir, key, &why);
  if (!cached) spdlog::info("planning {}: {}; measuring, and keeping the plan for the next start", model.dir, why);
  return cached;
}

}  // namespace

EnginePlan plan_engine(const std::shared_ptr<const LoadedModel>& model, const PlanRequest& request) {
  EnginePlan plan;
  const int limit = std::max(1, std::min(request.limit, model->config.max_batch));
  std::optional<PlanKey> key;
  std::optional<CachedPlan> cached;
  if (!request.cache_dir.empty()) {
    try {
      key = plan_key({model->dir, request.optimize, request.kernels, request.shared, limit, request.max_batch,
                      "libtorch " + libtorch_version(), request.engines});
      cached = cached_plan(*model, request, *key);
    } catch (const std::exception& e) {
      spdlog::warn("plan cache not used: {}", e.what());
    }
  }
  const std::vector<int64_t>& chunks =
      cached && request.winograd_chunks.empty() ? cached->winograd_chunks : request.winograd_chunks;
  plan.optimize = optimize_model(*model, request.optimize, request.shared, chunks, request.kernels);
  if (!plan.optimize.fallback.empty()) {
    spdlog::warn("{}: engine.optimize = \"{}\" not applied, running the model as loaded: {}", model->dir,
                 request.optimize, plan.optimize.fallback);
  }
  // Without AVX512_BF16 oneDNN emulates bf16 arithmetic: measured 0.41x
  // plain's throughput on CNN10 on a Cascade Lake VM and 0.07x on an AVX2
  // AMD EPYC (bench/RESULTS.md), so the WARN says how much it may cost.
  if (plan.optimize.applied == "bf16" && !__builtin_cpu_supports("avx512bf16")) {
    spdlog::warn("{}: engine.optimize = \"bf16\" on a CPU without AVX512_BF16: oneDNN emulates it, 2.4-14x "
                 "slower than the unoptimized model on CNN10 (bench/RESULTS.md); \"onednn\" is the fast path here",
                 model->dir);
  }
  if (!plan.optimize.winograd_fallback.empty()) {
    spdlog::warn("{}: corepool's oneDNN layers (Winograd convolutions, prepacked linear) not used, running "
                 "LibTorch's: {}",
                 model->dir,
                 plan.optimize.winograd_fallback);
  }
  plan.stateful = stateful_text(model->config);
  if (request.max_batch > 0) {
    plan.max_batch = request.max_batch;  // an explicit value wins; the executors clamp it as before
  } else if (model->config.is_stateful()) {
    // calibrate_batch() times forward(), which a stateful model does not run:
    // the batch driver fills batches of streams, so the model's own limit it is.
    plan.max_batch = limit;
  } else if (cached && cached->measured_batch) {
    plan.calibration = cached->calibration;
    plan.max_batch = std::min(plan.calibration.best, limit);
    plan.measured = plan.cached = true;
    plan.planned_at = cached->planned_at;
  } else {
    plan.calibration = calibrate_batch(model, limit, 4.0, request.engines);
    plan.max_batch = plan.calibration.best;
    plan.measured = true;
  }
  // Kept when something was measured here and the optimization took: a
  // fallback's plan describes a module the next start may not fall back to.
  const bool measured_here = !cached || plan.optimize.winograd_chunks != cached->winograd_chunks ||
                             (plan.measured && !plan.cached);
  if (key && measured_here && plan.optimize.fallback.empty()) {
    const CachedPlan keep{plan.optimize.winograd_chunks, plan.measured, plan.calibration, ""};
    if (const std::string err = write_plan(request.cache_dir, *key, keep); !err.empty()) {
      spdlog::warn("plan cache: cannot keep the plan: {}", err);
    }
  }
  spdlog::info("engine plan: {}", plan.text());
  return plan;
}

}  // namespace corepool
