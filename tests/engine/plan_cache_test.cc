// The plan cache (worker/plan_cache.h): keyed by what the model is, not where
// it lies; a plan measured once is what the next start runs; a stale, foreign
// or damaged entry is measured over, never trusted.
#include "worker/plan_cache.h"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/engine/small_model.h"
#include "tests/support/captured_log.h"
#include "tests/support/temp_dir.h"
#include "worker/engine_plan.h"
#include "worker/runtime.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::captured_log;

PlanKeyInputs inputs(const std::string& model_dir) { return {model_dir, "onednn", "auto", false, 64, 0, "libtorch x"}; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(PlanCacheKeyTest, TheKeyIsTheModelsContentNotItsPath) {
  testing::TempDir dir;
  const std::string model = testing::small_model_dir(dir);
  const std::string copy = dir / "copy";
  fs::copy(model, copy);
  EXPECT_EQ(plan_key(inputs(model)).file_name(), plan_key(inputs(copy)).file_name()) << "same files, same plan";
  std::ofstream(copy + "/model.toml", std::ios::app) << "# edited\n";
  EXPECT_NE(plan_key(inputs(model)).file_name(), plan_key(inputs(copy)).file_name()) << "a changed model.toml";
}

TEST(PlanCacheKeyTest, EveryChoiceOfTheRequestIsPartOfTheKey) {
  testing::TempDir dir;
  const std::string model = testing::small_model_dir(dir);
  const std::string base = plan_key(inputs(model)).file_name();
  auto changed = [&](auto edit) {
    PlanKeyInputs in = inputs(model);
    edit(in);
    return plan_key(in).file_name();
  };
  EXPECT_NE(base, changed([](PlanKeyInputs& in) { in.optimize = "bf16"; }));
  EXPECT_NE(base, changed([](PlanKeyInputs& in) { in.kernels = "portable"; }));
  EXPECT_NE(base, changed([](PlanKeyInputs& in) { in.shared = true; }));
  EXPECT_NE(base, changed([](PlanKeyInputs& in) { in.limit = 32; }));
  EXPECT_NE(base, changed([](PlanKeyInputs& in) { in.max_batch = 4; }));
  EXPECT_NE(base, changed([](PlanKeyInputs& in) { in.libraries = "libtorch y"; }));
  EXPECT_NE(base, changed([](PlanKeyInputs& in) { in.engines = 2; }));
  const std::string text = plan_key(inputs(model)).text;
  EXPECT_THAT(text, HasSubstr("model.pt "));
  EXPECT_THAT(text, HasSubstr("cpu "));
  EXPECT_THAT(text, HasSubstr("corepool "));
}

TEST(PlanCacheKeyTest, AMissingModelFileIsNamed) {
  testing::TempDir dir;
  EXPECT_THROW(
      {
        try {
          plan_key(inputs(dir / "nothing"));
        } catch (const std::runtime_error& e) {
          EXPECT_THAT(e.what(), HasSubstr("nothing/model.pt"));
          throw;
        }
      },
      std::runtime_error);
}

TEST(PlanCacheFileTest, WhatIsWrittenIsReadBack) {
  testing::TempDir dir;
  const PlanKey key{"a key\n"};
  CachedPlan plan;
  plan.winograd_chunks = {2, 4, 8};
  plan.measured_batch = true;
  plan.calibration.best = 4;
  plan.calibration.rounds = 7;
  plan.calibration.settled = true;
  plan.calibration.costs = {{1, 10.5, 0.02}, {2, 8.25, 0.01}, {4, 6.0, 0.03}};
  ASSERT_EQ(write_plan(dir / "cache", key, plan), "");
  std::string why;
  const auto read = read_plan(dir / "cache", key, &why);
  ASSERT_TRUE(read) << why;
  EXPECT_EQ(read->winograd_chunks, plan.winograd_chunks);
  EXPECT_EQ(read->calibration.best, 4);
  EXPECT_EQ(read->calibration.rounds, 7);
  ASSERT_EQ(read->calibration.costs.size(), 3u);
  EXPECT_DOUBLE_EQ(read->calibration.costs[1].ms_per_item, 8.25);
  EXPECT_DOUBLE_EQ(read->calibration.costs[2].spread, 0.03);
  EXPECT_THAT(read->planned_at, ::testing::MatchesRegex("20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T.*Z"));
  for (const auto& e : fs::directory_iterator(dir / "cache")) {
    EXPECT_EQ(e.path().filename().string(), key.file_name()) << "no temporary file left behind";
  }
}

TEST(PlanCacheFileTest, AMissingForeignOrDamagedEntryIsNotUsedAndSaysWhy) {
  testing::TempDir dir;
  const PlanKey key{"mine\n"}, other{"theirs\n"};
  std::string why;
  EXPECT_FALSE(read_plan(dir.path(), key, &why));
  EXPECT_THAT(why, HasSubstr("no cached plan"));
  ASSERT_EQ(write_plan(dir.path(), other, CachedPlan{}), "");
  fs::rename(dir / other.file_name(), dir / key.file_name());  // a hash collision, as it would look
  EXPECT_FALSE(read_plan(dir.path(), key, &why));
  EXPECT_THAT(why, HasSubstr("another key"));
  std::ofstream(dir / key.file_name()) << "{\"key\": \"mine\\n\", \"winograd_chunks\": [1,";  // cut short
  EXPECT_FALSE(read_plan(dir.path(), key, &why));
  EXPECT_THAT(why, HasSubstr("malformed"));
  std::ofstream(dir / key.file_name())
      << R"({"key": "mine\n", "planned_at": "x", "winograd_chunks": [], "calibration": {"best": 0, "rounds": 1,
             "settled": true, "seconds": 0, "costs": []}})";
  EXPECT_FALSE(read_plan(dir.path(), key, &why)) << "batch 0 is not a plan";
}

TEST(PlanCacheFileTest, ADirectoryThatCannotBeMadeIsAnErrorStringNotAThrow) {
  testing::TempDir dir;
  std::ofstream(dir / "file") << "x";
  EXPECT_THAT(write_plan(dir / "file/cache", PlanKey{"k"}, CachedPlan{}), HasSubstr("file/cache"));
}

// The whole loop through plan_engine on a real (small) model: measure and
// keep, then reuse; an edited entry shows the cached batch is the one used;
// --replan measures over it.
TEST(PlanCacheEngineTest, ASecondStartRunsTheCachedPlanAndReplanMeasuresAgain) {
  testing::TempDir dir;
  const std::string model_dir = testing::small_model_dir(dir);
  const std::string cache = dir / "cache";
  PlanRequest request{"onednn", 0, 8, false, {}, "auto", cache, false};

  EnginePlan first;
  std::string log = captured_log([&] { first = plan_engine(load_model(model_dir), request); });
  EXPECT_FALSE(first.cached);
  EXPECT_THAT(log, HasSubstr("no cached plan"));
  EXPECT_THAT(log, HasSubstr("measured in"));
  const std::string file = cache + "/" +
      plan_key({model_dir, "onednn", "auto", false, 8, 0, "libtorch " + libtorch_version()}).file_name();
  ASSERT_TRUE(fs::exists(file)) << log;

  EnginePlan second;
  log = captured_log([&] { second = plan_engine(load_model(model_dir), request); });
  EXPECT_TRUE(second.cached) << log;
  EXPECT_EQ(second.max_batch, first.max_batch);
  EXPECT_EQ(second.optimize.winograd_chunks, first.optimize.winograd_chunks);
  EXPECT_THAT(log, HasSubstr("from the plan cache"));

  // Edit the kept batch: the next start must run what the file says.
  nlohmann::json j = nlohmann::json::parse(slurp(file));
  const int edited = first.max_batch == 2 ? 4 : 2;
  j["calibration"]["best"] = edited;
  std::ofstream(file) << j.dump();
  EnginePlan third;
  captured_log([&] { third = plan_engine(load_model(model_dir), request); });
  EXPECT_EQ(third.max_batch, edited);

  request.replan = true;
  EnginePlan fourth;
  log = captured_log([&] { fourth = plan_engine(load_model(model_dir), request); });
  EXPECT_FALSE(fourth.cached);
  EXPECT_THAT(log, HasSubstr("--replan"));
  EXPECT_EQ(nlohmann::json::parse(slurp(file))["calibration"]["best"].get<int>(), fourth.max_batch)
      << "the new measurement replaced the edited entry";
}

}  // namespace
}  // namespace corepool
