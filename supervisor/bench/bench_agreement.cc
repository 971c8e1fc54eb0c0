// `corepool bench --bf16-agreement`: what engine.optimize = bf16 costs in
// answers. The model is loaded twice, optimized once as onednn (fp32) and once
// as bf16, and both score the same items: for a tagger (the default model's
// contract), the held-out set tests/engine/tagger_test.cc uses and the demo
// audio; for any other model, the demo audio only (max |difference|).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "supervisor/bench/bench_agreement.h"

#include "audio/segmenter.h"
#include "models/train/tagger_data.h"
#include "supervisor/bench/bench.h"
#include "tools/sound_classes.h"
#include "worker/engine.h"
#include "worker/optimize/optimize.h"

namespace corepool {
namespace {

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// Both engines on the same items, in batches of 16, until the deadline.
void compare(Engine& fp32, Engine& bf16, const std::vector<BatchItem>& items, const ModelConfig& cfg,
             const Deadline& deadline, Agreement& a) {
  for (size_t at = 0; at < items.size(); at += 16) {
    if (deadline && std::chrono::steady_clock::now() > *deadline) return;
    const std::vector<BatchItem> batch(items.begin() + at, items.begin() + std::min(items.size(), at + 16));
    const auto s32 = fp32.infer_items(batch), s16 = bf16.infer_items(batch);
    for (size_t i = 0; i < batch.size(); ++i) {
      ++a.segments;
      for (size_t l = 0; l < s32[i].size(); ++l) {
        const float t = l < cfg.thresholds.size() ? cfg.thresholds[l] : 0.5f;
        ++a.labels;
        a.equal += (s32[i][l] >= t) == (s16[i][l] >= t);
        a.max_diff = std::max(a.max_diff, double(std::fabs(s32[i][l] - s16[i][l])));
      }
    }
  }
}

// The demo's 28 s (speech, music, noise, silence) resampled to the model's
// rate and cut into segments as the pipeline cuts them.
std::vector<std::vector<float>> demo_segments(const ModelConfig& cfg) {
  const std::vector<float> pcm = synth::demo_samples(cfg.sample_rate);
  return cut_segments(pcm.data(), pcm.size(), size_t(cfg.segment_samples()), size_t(cfg.hop_samples()));
}

void print(const char* what, const Agreement& a) {
  std::printf("  %-34s %5llu segments: labels agree %.4f (%llu of %llu), max |score difference| %.4f\n", what,
              static_cast<unsigned long long>(a.segments), a.share(),
              static_cast<unsigned long long>(a.equal), static_cast<unsigned long long>(a.labels), a.max_diff);
}

std::shared_ptr<const LoadedModel> optimized(const std::string& dir, const std::string& mode) {
  auto model = load_model(dir);
  const OptimizeOutcome o = optimize_model(*model, mode, /*shared=*/false);
  if (!o.fallback.empty()) throw std::runtime_error("bench: " + mode + " not applied: " + o.fallback);
  return model;
}

}  // namespace

Bf16Agreement measure_bf16_agreement(const std::string& dir, Deadline deadline) {
  const auto fp32_model = optimized(dir, "onednn");
  const auto bf16_model = optimized(dir, "bf16");
  const ModelConfig& cfg = fp32_model->config;
  Engine fp32(fp32_model), bf16(bf16_model);
  Bf16Agreement r;
  r.tagger = true;
  try {
    train::tagger_contract(dir + "/model.toml");
  } catch (const std::exception&) {
    r.tagger = false;  // not the tagger's contract: its held-out set means nothing to this model
  }
  if (r.tagger) {
    // As tests/engine/tagger_test.cc: held-out voices, seed 77, 100 per class.
    const train::Dataset held = train::make_dataset(cfg, synth::Split::kHeldOutVoices, 77, 100);
    const torch::Tensor x = held.x.contiguous();
    std::vector<BatchItem> items;
    for (int64_t i = 0; i < x.size(0); ++i) {
      items.push_back({x.data_ptr<float>() + i * static_cast<int64_t>(cfg.item_floats()), TaskInput::kModelInput});
    }
    r.planned += items.size();
    compare(fp32, bf16, items, cfg, deadline, r.held_out);
  }
  const auto segments = demo_segments(cfg);
  std::vector<BatchItem> items;
  for (const auto& s : segments) items.push_back({s.data(), TaskInput::kPcm});
  r.planned += items.size();
  compare(fp32, bf16, items, cfg, deadline, r.demo);
  return r;
}

ExitCode run_bf16_agreement(const BenchOptions& o) {
  const Bf16Agreement r = measure_bf16_agreement(o.model_dir);
  std::printf("bf16 vs fp32 (onednn), model %s:\n", o.model_dir.c_str());
  if (r.tagger) print("held-out set (voices, seed 77)", r.held_out);
  print("demo audio (corepool-gen-audio --demo)", r.demo);
  return ExitCode::kOk;
}

}  // namespace corepool
