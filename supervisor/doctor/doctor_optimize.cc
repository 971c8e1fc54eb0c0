// Two fresh loads of the model, one optimized in fp32 and one in bf16, score
// the same segments; features are computed once, by the fp32 engine's feature
// step, so that only forward() differs between the two.
#include "supervisor/doctor/doctor_optimize.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "audio/segmenter.h"
#include "tools/sound_classes.h"
#include "worker/engine.h"

namespace corepool {
namespace {

std::vector<std::vector<float>> evaluation_segments(const ModelConfig& cfg) {
  std::vector<std::vector<float>> out;
  for (auto& s : synth::labeled_segments(synth::Split::kHeldOut, 2026, 12, cfg.sample_rate, cfg.segment_seconds)) {
    out.push_back(std::move(s.samples));
  }
  const std::vector<float> demo = synth::demo_samples(cfg.sample_rate);
  Segmenter segmenter(cfg.segment_samples(), cfg.hop_samples());
  segmenter.push(demo.data(), demo.size());
  Segment s;
  while (segmenter.next(s) || segmenter.finish(s)) out.push_back(std::move(s.samples));
  return out;
}

std::vector<std::vector<float>> scores(const std::shared_ptr<const LoadedModel>& model,
                                       const std::vector<std::vector<float>>& segments) {
  Engine engine(model);
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < segments.size(); i += 8) {
    std::vector<const float*> batch;
    for (size_t k = i; k < std::min(segments.size(), i + 8); ++k) batch.push_back(segments[k].data());
    for (auto& row : engine.infer(batch)) out.push_back(std::move(row));
  }
  return out;
}

}  // namespace

CheckResult plan_check(const std::shared_ptr<const LoadedModel>& model, const std::string& optimize, int max_batch,
                       EnginePlan& plan) {
  plan = plan_engine(model, {optimize, max_batch, 1024, false});
  if (!plan.optimize.fallback.empty()) {
    return CheckResult::warn("engine plan", plan.text() + ": " + plan.optimize.fallback,
                             "the model runs as loaded; see the reason (engine.optimize = \"none\" silences this)");
  }
  return CheckResult::ok("engine plan", plan.text());
}

Bf16Agreement measure_bf16_agreement(const std::string& dir) {
  auto fp32 = load_model(dir);
  auto bf16 = load_model(dir);
  const OptimizeOutcome a = optimize_model(*fp32, "onednn", false);
  const OptimizeOutcome b = optimize_model(*bf16, "bf16", false);
  if (!b.fallback.empty()) throw std::runtime_error("bf16 not applicable: " + b.fallback);
  (void)a;  // a fallback of fp32 leaves the module as loaded: still fp32, still the reference
  const auto segments = evaluation_segments(fp32->config);
  const auto want = scores(fp32, segments), got = scores(bf16, segments);
  Bf16Agreement r;
  r.segments = segments.size();
  size_t same = 0, decisions = 0;
  const auto& thresholds = fp32->config.thresholds;
  for (size_t i = 0; i < want.size(); ++i) {
    for (size_t k = 0; k < want[i].size(); ++k) {
      r.max_difference = std::max(r.max_difference, double(std::abs(want[i][k] - got[i][k])));
      same += (want[i][k] >= thresholds[k]) == (got[i][k] >= thresholds[k]);
      ++decisions;
    }
  }
  r.label_agreement = decisions ? double(same) / decisions : 0;
  return r;
}

CheckResult bf16_check(const std::string& dir) {
  try {
    const Bf16Agreement r = measure_bf16_agreement(dir);
    char found[160];
    std::snprintf(found, sizeof found, "bf16 vs fp32 on %zu held-out and demo segments: labels agree %.1f%%, "
                  "max |score difference| %.2g", r.segments, 100 * r.label_agreement, r.max_difference);
    if (r.label_agreement >= 0.99) return CheckResult::ok("bf16", found);
    return CheckResult::warn("bf16", found, "keep engine.optimize = \"onednn\" for this model");
  } catch (const std::exception& e) {
    return CheckResult::warn("bf16", std::string("not measured: ") + e.what(),
                             "install espeak-ng (the held-out speech) or check the model");
  }
}

}  // namespace corepool
