// The engine on the bundled default model: scores equal an independent
// forward of the same TorchScript file and are deterministic, batching does
// not change them, and every kind of broken model directory is a ModelError
// that names the file.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/engine/segments.h"
#include "tests/engine/small_model.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "worker/engine.h"
#include "worker/features.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;
using testing::noise_segments;
using testing::pointers;

// The scores are the model's own: a module loaded here straight from model.pt
// (not through load_model), run by hand on the same features, gives the same
// numbers for every segment and label, in order. The default model ends in a
// softmax, so (0, 1) alone would hold for almost any output.
TEST(EngineTest, DefaultModelGivesOneScoreInZeroOnePerLabel) {
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  Engine engine(model);
  auto segs = noise_segments(model->config, 3, 1);
  auto scores = engine.infer(pointers(segs));

  torch::jit::Module reference = torch::jit::load(std::string(COREPOOL_DEFAULT_MODEL) + "/model.pt");
  reference.eval();
  torch::InferenceMode guard;
  const torch::Tensor features = FeatureExtractor(model->config).compute(pointers(segs));
  const torch::Tensor expected = reference.forward({features}).toTensor().contiguous();
  ASSERT_EQ(expected.dim(), 2);
  ASSERT_EQ(scores.size(), 3u);
  ASSERT_EQ(expected.size(0), 3);
  for (size_t i = 0; i < scores.size(); ++i) {
    ASSERT_EQ(scores[i].size(), model->config.labels.size());
    ASSERT_EQ(expected.size(1), int64_t(scores[i].size()));
    for (size_t k = 0; k < scores[i].size(); ++k) {
      EXPECT_NEAR(scores[i][k], expected[int64_t(i)][int64_t(k)].item<float>(), 1e-6) << "segment " << i << ", label " << k;
      EXPECT_GT(scores[i][k], 0.0f);
      EXPECT_LT(scores[i][k], 1.0f);
    }
  }
  // Different inputs, different scores: the comparison above is not between constants.
  EXPECT_NE(scores[0], scores[1]);
}

TEST(EngineTest, SameInputGivesBitwiseSameScores) {
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  Engine engine(model);
  auto segs = noise_segments(model->config, 2, 7);
  EXPECT_EQ(engine.infer(pointers(segs)), engine.infer(pointers(segs)));
}

TEST(EngineTest, BatchedScoresEqualOneByOneScores) {
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  Engine engine(model);
  auto segs = noise_segments(model->config, 4, 3);
  auto batched = engine.infer(pointers(segs));
  for (size_t i = 0; i < segs.size(); ++i) {
    auto single = engine.infer({segs[i].data()});
    for (size_t k = 0; k < single[0].size(); ++k) EXPECT_NEAR(single[0][k], batched[i][k], 1e-5);
  }
}

TEST(EngineTest, MissingModelDirectoryIsAModelErrorNamingIt) {
  try {
    load_model("/nonexistent/model-dir");
    FAIL() << "no error";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/model-dir"));
    EXPECT_THAT(e.what(), HasSubstr("not found"));
  }
}

TEST(EngineTest, DirectoryWithoutModelPtIsAModelError) {
  testing::TempDir dir;
  std::filesystem::copy_file(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml", dir / "model.toml");
  EXPECT_THROW(
      {
        try {
          load_model(dir.path());
        } catch (const ModelError& e) {
          EXPECT_THAT(e.what(), HasSubstr("model.pt"));
          throw;
        }
      },
      ModelError);
}

TEST(EngineTest, GarbageModelPtIsAModelErrorNamingTheFile) {
  testing::TempDir dir;
  std::filesystem::copy_file(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml", dir / "model.toml");
  std::ofstream(dir / "model.pt") << "this is not a zip archive";
  try {
    load_model(dir.path());
    FAIL() << "no error";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir / "model.pt"));
    EXPECT_THAT(e.what(), HasSubstr("TorchScript"));
  }
}

TEST(EngineTest, BadModelTomlIsAModelErrorWithFileAndLine) {
  testing::TempDir dir;
  std::filesystem::copy_file(std::string(COREPOOL_DEFAULT_MODEL) + "/model.pt", dir / "model.pt");
  std::ofstream(dir / "model.toml") << "[model]\nname = \"x\"\nsample_rate = -5\n";
  try {
    load_model(dir.path());
    FAIL() << "no error";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.toml:3"));
    EXPECT_THAT(e.what(), HasSubstr("sample_rate"));
  }
}

TEST(EngineTest, LabelCountThatDoesNotMatchTheOutputFailsTheShapeCheck) {
  testing::TempDir dir;
  std::filesystem::copy_file(std::string(COREPOOL_DEFAULT_MODEL) + "/model.pt", dir / "model.pt");
  ModelConfig cfg = load_model_config(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml");
  cfg.labels = {"a", "b", "c"};
  cfg.thresholds = {0.5f, 0.5f, 0.5f};
  cfg.quiet_label.clear();  // the default model's "silence" is not among these labels
  std::ofstream(dir / "model.toml") << to_toml(cfg);
  Engine engine(load_model(dir.path()));
  try {
    engine.check_output_shape();
    FAIL() << "no error";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), HasSubstr("does not match"));
  }
}

// An engine's warm-up is what the bench's ceilings run before their clock
// (bench_ceiling.cc): the output check and then one more forward(), both at
// the batch it is given. The model counts its own calls.
TEST(EngineTest, WarmUpRunsTwoForwardsAtTheBatchItIsGiven) {
  testing::TempDir dir;
  Engine engine(load_model(testing::call_counting_model_dir(dir)));
  engine.warm_up(3);
  const std::vector<float> silence(engine.model().config.segment_samples(), 0.0f);
  const auto scores = engine.infer({silence.data()});
  ASSERT_EQ(scores.size(), 1u);
  EXPECT_EQ(scores[0][0], 3.0f) << "forward() calls, this one included: two to warm up, then this";
  EXPECT_EQ(scores[0][1], 3.0f) << "the largest batch run";
}

}  // namespace
}  // namespace corepool
