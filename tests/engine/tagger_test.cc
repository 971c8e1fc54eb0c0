// The trained default model (models/default) on sound it never saw, scored
// in-process, overall and class by class: held-out voices and seeds, and a
// set whose every class comes from generators training never used.
// The same model through the real binary: tests/e2e/tagger_cli_test.cc.
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/train/tagger_data.h"
#include "tools/sound_classes.h"
#include "worker/model/model.h"
#include "worker/model/torch_module.h"

namespace corepool {
namespace {

// Per class, how many held-out segments have exactly their true label at or
// above its threshold (and no other): the scoring of models/train, written
// again here from its definition.
std::vector<double> per_class_accuracy(const torch::Tensor& scores, const torch::Tensor& truth,
                                       const ModelConfig& cfg) {
  std::vector<int> right(cfg.labels.size(), 0), total(cfg.labels.size(), 0);
  const auto s = scores.accessor<float, 2>();
  for (int64_t i = 0; i < scores.size(0); ++i) {
    const int64_t label = truth[i].item<int64_t>();
    bool exact = true;
    for (size_t l = 0; l < cfg.labels.size(); ++l) {
      exact = exact && (s[i][int64_t(l)] >= cfg.thresholds[l]) == (int64_t(l) == label);
    }
    right[size_t(label)] += exact;
    ++total[size_t(label)];
  }
  std::vector<double> out;
  for (size_t l = 0; l < right.size(); ++l) out.push_back(total[l] ? double(right[l]) / total[l] : 0.0);
  return out;
}

// Prints the scores of `net` on `held` and returns each class's accuracy.
std::vector<double> score_held_out(torch::jit::Module& net, const train::Dataset& held, const ModelConfig& cfg,
                                   const char* name) {
  std::printf("%s: accuracy %.3f over %lld segments\n", name, train::accuracy(net, held, cfg),
              static_cast<long long>(held.x.size(0)));
  train::print_confusion(net, held, cfg);
  const std::vector<double> per_class = per_class_accuracy(train::scores(net, held).contiguous(), held.y, cfg);
  for (size_t l = 0; l < per_class.size(); ++l) std::printf("  %-8s %.3f\n", cfg.labels[l].c_str(), per_class[l]);
  return per_class;
}

// Held-out voices; music, noise and silence from training's generators with
// another seed. Seed 77 is neither the trainer's training seed (1) nor its
// held-out seed (1001).
TEST(TaggerTest, HeldOutSegmentsAreTaggedRightAtLeast95PercentOfTheTime) {
  const auto model = load_model(COREPOOL_DEFAULT_MODEL);
  const ModelConfig cfg = train::tagger_contract(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml");
  const train::Dataset held = train::make_dataset(cfg, synth::Split::kHeldOutVoices, 77, 100);
  torch::jit::Module net = module_of(*model);
  EXPECT_GE(train::accuracy(net, held, cfg), 0.95);
  // No class may hide behind the others: each is at least 90 % right.
  const std::vector<double> per_class = score_held_out(net, held, cfg, "held-out voices and seeds");
  for (size_t l = 0; l < per_class.size(); ++l) EXPECT_GE(per_class[l], 0.90) << cfg.labels[l];
}

// Every class from generators training never used (tools/sound_classes.h,
// Split::kHeldOut): other voices, instruments, scales, tempi, noise colours
// and silences. Each class at least 90 % right.
TEST(TaggerTest, SegmentsFromHeldOutGeneratorsAreTaggedRightAtLeast90PercentPerClass) {
  const auto model = load_model(COREPOOL_DEFAULT_MODEL);
  const ModelConfig cfg = train::tagger_contract(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml");
  const train::Dataset held = train::make_dataset(cfg, synth::Split::kHeldOut, 77, 100);
  torch::jit::Module net = module_of(*model);
  const std::vector<double> per_class = score_held_out(net, held, cfg, "held-out generators");
  for (size_t l = 0; l < per_class.size(); ++l) EXPECT_GE(per_class[l], 0.90) << cfg.labels[l];
}

}  // namespace
}  // namespace corepool
