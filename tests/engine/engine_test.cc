// The engine on the bundled default model: scores are well-formed and
// deterministic, batching does not change them, and every kind of broken model
// directory is a ModelError that names the file.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/engine/test_support.h"
#include "worker/engine.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;

std::vector<std::vector<float>> noise_segments(const ModelConfig& cfg, int n, unsigned seed) {
  std::vector<std::vector<float>> out(n, std::vector<float>(cfg.segment_samples()));
  uint32_t x = seed;
  for (auto& seg : out) {
    for (auto& v : seg) {
      x = x * 1664525u + 1013904223u;
      v = static_cast<float>((x >> 8) * (1.0 / 16777216.0) - 0.5) * 0.4f;
    }
  }
  return out;
}

std::vector<const float*> pointers(const std::vector<std::vector<float>>& v) {
  std::vector<const float*> p;
  for (const auto& s : v) p.push_back(s.data());
  return p;
}

TEST(EngineTest, DefaultModelGivesOneScoreInZeroOnePerLabel) {
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  Engine engine(model);
  auto segs = noise_segments(model->config, 3, 1);
  auto scores = engine.infer(pointers(segs));
  ASSERT_EQ(scores.size(), 3u);
  for (const auto& s : scores) {
    ASSERT_EQ(s.size(), model->config.labels.size());
    for (float v : s) {
      EXPECT_GT(v, 0.0f);
      EXPECT_LT(v, 1.0f);
    }
  }
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
  std::ofstream(dir / "model.toml") << to_toml(cfg);
  Engine engine(load_model(dir.path()));
  try {
    engine.check_output_shape();
    FAIL() << "no error";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), HasSubstr("does not match"));
  }
}

}  // namespace
}  // namespace corepool
