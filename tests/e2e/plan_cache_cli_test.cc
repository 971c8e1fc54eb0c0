// The plan cache through the real binary (worker/plan_cache.h): the first
// start measures and says so, the next runs the kept plan and gives the same
// results, --replan measures again, "off" keeps nothing, and a cache that
// cannot be written costs a WARN, never the run.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tools/audio_synth.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// `corepool batch` in process mode (the mode whose plan is the slower to
// make), info log, with the cache variables of the test's own.
testing::ProcessResult batch(std::vector<std::string> flags, const testing::TempDir& dir) {
  std::vector<std::string> args{COREPOOL_BIN, "--log-level", "info", "batch", "--model", COREPOOL_DEFAULT_MODEL,
                                "--mode", "process", "--workers", "1", "--no-progress", "--force",
                                "--out", dir / "out"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back(dir / "in.wav");
  const auto child = testing::spawn_process(
      args, dir.path(), {"XDG_CACHE_HOME=" + (dir / "xdg"), "HOME=" + (dir / "home"), "CACHE_DIRECTORY="});
  return testing::wait_process(child, std::chrono::minutes(2));
}

size_t files_in(const fs::path& d) {
  if (!fs::exists(d)) return 0;
  return static_cast<size_t>(std::distance(fs::directory_iterator(d), fs::directory_iterator()));
}

TEST(PlanCacheCliTest, TheFirstStartMeasuresTheNextReusesReplanMeasuresAgain) {
  testing::TempDir dir;
  synth::write_audio(dir / "in.wav", synth::demo_of_seconds(6));
  const std::string cache = dir / "plans";

  const auto first = batch({"--plan-cache", cache}, dir);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.err, HasSubstr("no cached plan"));
  EXPECT_THAT(first.err, HasSubstr("measured in"));
  EXPECT_EQ(files_in(cache), 1u);
  const std::string first_result = testing::read_file(dir / "out/in.jsonl");

  const auto second = batch({"--plan-cache", cache}, dir);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.err, HasSubstr("from the plan cache"));
  EXPECT_THAT(second.err, Not(HasSubstr("measuring")));
  EXPECT_EQ(testing::read_file(dir / "out/in.jsonl"), first_result) << "the same plan, the same events";

  const auto third = batch({"--plan-cache", cache, "--replan"}, dir);
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_THAT(third.err, HasSubstr("--replan, measuring anew"));
  EXPECT_EQ(files_in(cache), 1u) << "replaced, not added";
}

TEST(PlanCacheCliTest, TheDefaultDirectoryFollowsXdgAndOffKeepsNothing) {
  testing::TempDir dir;
  synth::write_audio(dir / "in.wav", synth::demo_of_seconds(3));
  const auto by_default = batch({}, dir);
  ASSERT_EQ(by_default.exit_code, 0) << by_default.err;
  EXPECT_EQ(files_in(dir / "xdg/corepool"), 1u) << by_default.err;

  fs::remove_all(dir / "xdg");
  const auto off = batch({"--plan-cache", "off"}, dir);
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_FALSE(fs::exists(dir / "xdg")) << off.err;
  EXPECT_THAT(off.err, Not(HasSubstr("plan cache")));
}

TEST(PlanCacheCliTest, ACacheThatCannotBeWrittenIsAWarningAndTheRunGoesOn) {
  testing::TempDir dir;
  synth::write_audio(dir / "in.wav", synth::demo_of_seconds(3));
  std::ofstream(dir / "a-file") << "not a directory";
  const auto r = batch({"--plan-cache", dir / "a-file/plans"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("plan cache: cannot keep the plan"));
  EXPECT_THAT(r.err, HasSubstr("a-file/plans"));
}

}  // namespace
}  // namespace corepool
