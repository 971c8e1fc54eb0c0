// Unit tests for supervisor/batch/merge.h and shard_report.h: the merged summary of
// results written by several shards, and how a missing result is explained
// (failed, with the shard's error; or unfinished).
#include "supervisor/batch/merge.h"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "supervisor/batch/shard_report.h"
#include "tests/support/scratch_dir_test.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class MergeTest : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    for (const char* name : {"in/a.wav", "in/b.wav", "in/sub/c.wav", "in/sub/d.wav"}) touch(name);
  }
  void touch(const std::string& name) {
    fs::create_directories(fs::path(path(name)).parent_path());
    std::ofstream(path(name)) << "x";
  }
  void result(const std::string& key, double duration, int events, bool complete = true) {
    fs::create_directories(fs::path(path("out/" + key + ".jsonl")).parent_path());
    std::ofstream out(path("out/" + key + ".jsonl"));
    for (int i = 0; i < events; ++i) out << R"({"start":0,"end":1,"label":"x","score":1})" << "\n";
    if (complete) {
      out << R"({"summary":{"duration":)" << duration << R"(,"segments":7,"events":)" << events << "}}\n";
    }
  }
  MergeOptions options() const {
    MergeOptions o;
    o.out_dir = path("out");
    o.paths = {path("in")};
    return o;
  }
};

TEST_F(MergeTest, CompleteResultsAddUpAndTheExitCodeIsZero) {
  result("a.wav", 1800, 2);
  result("b.wav", 1800, 0);
  result("sub/c.wav", 3600, 1);
  result("sub/d.wav", 0.5, 3);
  const MergeSummary s = merge_results(options());
  EXPECT_EQ(s.inputs, 4u);
  EXPECT_EQ(s.complete, 4u);
  EXPECT_DOUBLE_EQ(s.audio_seconds, 7200.5);
  EXPECT_EQ(s.segments, 28u);
  EXPECT_EQ(s.events, 6u);
  EXPECT_EQ(s.exit_code(), 0);
  EXPECT_NEAR(s.to_json()["audio_hours"].get<double>(), 2.0001, 1e-4);
}

TEST_F(MergeTest, AMissingResultIsFailedWithTheShardsErrorOrElseUnfinished) {
  result("a.wav", 10, 1);
  result("sub/c.wav", 10, 1, /*complete=*/false);  // killed mid-write: not a result
  ShardReport report;
  report.index = 1;
  report.count = 2;
  report.failures = {{"b.wav", "in/b.wav: truncated: header says 8000 frames, read 4000"}};
  write_shard_report(path("out"), report);
  const MergeSummary s = merge_results(options());
  EXPECT_EQ(s.complete, 1u);
  ASSERT_EQ(s.failed.size(), 1u);
  EXPECT_EQ(s.failed[0].key, "b.wav");
  EXPECT_THAT(s.failed[0].message, HasSubstr("truncated"));
  EXPECT_THAT(s.unfinished, ElementsAre("sub/c.wav", "sub/d.wav"));
  EXPECT_EQ(s.shard_reports, 1u);
  EXPECT_EQ(s.exit_code(), 1);
}

TEST_F(MergeTest, AShardReportReadsBackAsWritten) {
  ShardReport report;
  report.index = 3;
  report.count = 4;
  report.inputs = 9;
  report.done = 5;
  report.skipped = 2;
  report.audio_seconds = 12.5;
  report.failures = {{"x.wav", "x.wav: bad"}, {"", "nope/: no such file or directory"}};
  write_shard_report(path("out"), report);
  EXPECT_TRUE(fs::exists(path("out/.corepool-shards/3-of-4.json")));
  std::vector<std::string> problems;
  const auto reports = read_shard_reports(path("out"), problems);
  EXPECT_TRUE(problems.empty());
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].index, 3u);
  EXPECT_EQ(reports[0].count, 4u);
  EXPECT_EQ(reports[0].done, 5u);
  EXPECT_EQ(reports[0].skipped, 2u);
  EXPECT_FALSE(reports[0].host.empty());
  ASSERT_EQ(reports[0].failures.size(), 2u);
  EXPECT_EQ(reports[0].failures[1].message, "nope/: no such file or directory");
}

TEST_F(MergeTest, AMalformedShardReportIsNamedNotFatal) {
  result("a.wav", 10, 1);
  fs::create_directories(path("out/.corepool-shards"));
  std::ofstream(path("out/.corepool-shards/0-of-2.json")) << "{not json";
  const MergeSummary s = merge_results(options());
  ASSERT_EQ(s.problems.size(), 1u);
  EXPECT_THAT(s.problems[0], HasSubstr("0-of-2.json: not a shard report"));
  EXPECT_EQ(s.complete, 1u);
}

TEST_F(MergeTest, AManifestListedFileThatIsGoneIsFailedByTheShardThatOwnsIt) {
  std::ofstream(path("files.txt")) << "in/a.wav\nin/zzz.wav\n";
  result("a.wav", 10, 1);
  ShardReport report;
  report.count = 2;
  report.failures = {{"zzz.wav", path("files.txt") + ":2: " + path("in/zzz.wav") + ": no such file or directory"}};
  write_shard_report(path("out"), report);
  MergeOptions o;
  o.out_dir = path("out");
  o.manifest = path("files.txt");
  o.root = path("in");
  const MergeSummary s = merge_results(o);
  EXPECT_EQ(s.inputs, 2u);
  ASSERT_EQ(s.failed.size(), 1u);
  EXPECT_THAT(s.failed[0].message, HasSubstr("files.txt:2: "));
  EXPECT_TRUE(s.unfinished.empty());
}

}  // namespace
}  // namespace corepool
