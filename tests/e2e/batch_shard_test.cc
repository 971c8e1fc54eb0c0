// Sharded `corepool batch` and `corepool merge` through the real binary: three
// shards (picked by --shard, Slurm's and an Indexed Job's variables) together
// write exactly the unsharded results; bad shard values and manifests exit 2
// naming the value; a missing listed file is reported by its shard with its
// line; a killed shard resumes without redoing or losing anything.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "supervisor/batch/shard.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tools/audio_synth.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using nlohmann::json;

// `model`: the test that kills a shard mid-run takes CNN10, whose run lasts
// long enough for the kill (the small tagger's is over in a second or less).
std::vector<std::string> batch_args(std::vector<std::string> args, const std::string& model = COREPOOL_DEFAULT_MODEL) {
  args.insert(args.begin(), {COREPOOL_BIN, "--log-level", "warn", "batch", "--model", model,
                             "--workers", "2", "--no-progress"});
  return args;
}

testing::ProcessResult batch(const std::vector<std::string>& args, const testing::TempDir& dir,
                             const std::vector<std::string>& env = {}) {
  return testing::wait_process(testing::spawn_process(batch_args(args), dir.path(), env), std::chrono::minutes(5));
}

testing::ProcessResult merge(const std::vector<std::string>& args, const testing::TempDir& dir) {
  std::vector<std::string> argv = {COREPOOL_BIN, "merge"};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::run_process(argv, dir.path());
}

// Every result under `out` (its file -> its lines without the summary's
// timing); temp files and shard reports are not results.
std::map<std::string, std::vector<json>> results(const std::string& out) {
  std::map<std::string, std::vector<json>> found;
  for (const auto& entry : fs::recursive_directory_iterator(out)) {
    const std::string rel = fs::relative(entry.path(), out).string();
    const bool jsonl = rel.size() > 6 && rel.compare(rel.size() - 6, 6, ".jsonl") == 0;
    if (!entry.is_regular_file() || !jsonl || rel.rfind(".corepool-shards/", 0) == 0) continue;
    std::vector<json> lines;
    for (const auto& line : testing::lines_of(testing::read_file(entry.path()))) lines.push_back(json::parse(line));
    if (!lines.empty() && lines.back().contains("summary")) {
      lines.back()["summary"].erase("wall_seconds");
      lines.back()["summary"].erase("x_realtime");
    }
    found[rel] = lines;
  }
  return found;
}

// Short files of different lengths in nested directories.
void write_inputs(const testing::TempDir& dir, int count) {
  for (int i = 0; i < count; ++i) {
    const std::string name = "in/" + std::string(i % 3 == 0 ? "" : i % 3 == 1 ? "a/" : "b/c/") +
                             "take" + std::to_string(i) + ".wav";
    fs::create_directories(fs::path(dir / name).parent_path());
    synth::write_audio(dir / name, synth::demo_of_seconds(3 + i % 4));
  }
}

TEST(BatchShardTest, ThreeShardsFromFlagSlurmAndIndexedJobWriteExactlyTheUnshardedResults) {
  testing::TempDir dir;
  write_inputs(dir, 9);
  auto whole = batch({"--out", dir / "whole", dir / "in"}, dir);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  auto s0 = batch({"--shard", "0/3", "--out", dir / "shards", dir / "in"}, dir);
  auto s1 = batch({"--out", dir / "shards", dir / "in"}, dir,
                  {"SLURM_ARRAY_TASK_ID=1", "SLURM_ARRAY_TASK_COUNT=3"});
  auto s2 = batch({"--out", dir / "shards", dir / "in"}, dir,
                  {"JOB_COMPLETION_INDEX=2", "COREPOOL_SHARD_COUNT=3"});
  ASSERT_EQ(s0.exit_code, 0) << s0.err;
  ASSERT_EQ(s1.exit_code, 0) << s1.err;
  ASSERT_EQ(s2.exit_code, 0) << s2.err;

  const auto expected = results(dir / "whole");
  ASSERT_EQ(expected.size(), 9u);
  EXPECT_EQ(results(dir / "shards"), expected);
  for (uint32_t i = 0; i < 3; ++i) {  // each shard wrote its own 1/3, and said so
    const json report = json::parse(testing::read_file(dir / ("shards/.corepool-shards/" + std::to_string(i) +
                                                               "-of-3.json")));
    size_t owned = 0;
    for (const auto& [rel, lines] : expected) owned += ShardSpec{i, 3, ""}.owns(rel.substr(0, rel.size() - 6));
    EXPECT_EQ(report["inputs"].get<size_t>(), owned) << i;
    EXPECT_EQ(report["done"].get<size_t>(), owned) << i;
  }

  auto merged = merge({"--out", dir / "shards", dir / "in"}, dir);
  EXPECT_EQ(merged.exit_code, 0) << merged.err;
  const json summary = json::parse(merged.out);
  EXPECT_EQ(summary["inputs"], 9);
  EXPECT_EQ(summary["complete"], 9);
  double seconds = 0;
  for (const auto& [rel, lines] : expected) seconds += lines.back()["summary"]["duration"].get<double>();
  EXPECT_NEAR(summary["audio_seconds"].get<double>(), seconds, 1e-3);
}

TEST(BatchShardTest, BadShardValuesAndManifestsExitTwoNamingTheValue) {
  testing::TempDir dir;
  synth::write_audio(dir / "a.wav", synth::demo_of_seconds(2));
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--shard", "3/2", dir / "a.wav"}, "--shard '3/2': the shard index must be below the count"},
      {{"--shard", "0/0", dir / "a.wav"}, "--shard '0/0': the shard count must be"},
      {{"--shard", "junk", dir / "a.wav"}, "--shard 'junk': expected I/N"},
      {{"--manifest", dir / "missing.txt"}, "--manifest " + dir / "missing.txt" + ": cannot read"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> full = {"--out", dir / "out"};
    full.insert(full.end(), args.begin(), args.end());
    auto r = batch(full, dir);
    EXPECT_EQ(r.exit_code, 2) << args[1] << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(message));
  }
  auto env = batch({"--out", dir / "out", dir / "a.wav"}, dir, {"SLURM_ARRAY_TASK_ID=x", "SLURM_ARRAY_TASK_COUNT=2"});
  EXPECT_EQ(env.exit_code, 2);
  EXPECT_THAT(env.err, HasSubstr("SLURM_ARRAY_TASK_ID='x': not a whole number"));
  auto none = batch({"--out", dir / "out"}, dir);
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("give input paths or --manifest FILE"));
  EXPECT_FALSE(fs::exists(dir / "out")) << "a rejected run wrote output";
}

TEST(BatchShardTest, AMissingListedFileIsReportedOnceByItsShardWithItsLine) {
  testing::TempDir dir;
  write_inputs(dir, 4);
  std::ofstream(dir / "files.txt") << "in/take0.wav\nin/a/take1.wav\nin/gone.wav\nin/b/c/take2.wav\n";
  std::string owner_err;
  int failed_shards = 0;
  for (const char* shard : {"0/2", "1/2"}) {
    auto r = batch({"--shard", shard, "--out", dir / "out", "--manifest", dir / "files.txt", "--root", dir / "in"},
                   dir);
    if (r.exit_code == 1) {
      ++failed_shards;
      owner_err = r.err;
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.err;
    }
  }
  EXPECT_EQ(failed_shards, 1);
  EXPECT_THAT(owner_err, HasSubstr(dir / "files.txt" + ":3: " + dir / "in/gone.wav" + ": no such file or directory"));
  EXPECT_EQ(results(dir / "out").size(), 3u);
  EXPECT_TRUE(fs::exists(dir / "out/a/take1.wav.jsonl"));  // same layout as `batch in/`

  auto merged = merge({"--out", dir / "out", "--manifest", dir / "files.txt", "--root", dir / "in"}, dir);
  EXPECT_EQ(merged.exit_code, 1);
  const json summary = json::parse(merged.out);
  EXPECT_EQ(summary["inputs"], 4);
  EXPECT_EQ(summary["complete"], 3);
  ASSERT_EQ(summary["failed"].size(), 1u);
  EXPECT_EQ(summary["failed"][0]["input"], "gone.wav");
  EXPECT_THAT(merged.err, HasSubstr("files.txt:3: "));
}

TEST(BatchShardTest, AKilledShardResumesWithoutRedoingOrLosingResults) {
  testing::TempDir dir;
  fs::create_directories(dir / "in");
  for (int i = 0; i < 12; ++i) synth::write_audio(dir / ("in/f" + std::to_string(i) + ".wav"), synth::demo_of_seconds(30));
  const ShardSpec shard{0, 2, ""};
  std::vector<std::string> mine;
  for (int i = 0; i < 12; ++i) {
    const std::string key = "f" + std::to_string(i) + ".wav";
    if (shard.owns(key)) mine.push_back(key);
  }
  ASSERT_GE(mine.size(), 3u);
  // Another shard's temp file on a shared directory, whose pid means nothing here.
  fs::create_directories(dir / "out");
  std::string foreign;
  for (int i = 0; foreign.empty(); ++i) {
    if (!shard.owns("f" + std::to_string(i) + ".wav")) foreign = dir / ("out/f" + std::to_string(i) + ".wav.jsonl.tmp.999999999");
  }
  std::ofstream(foreign) << "{}\n";

  const std::vector<std::string> args = {"--shard", "0/2", "--out", dir / "out", dir / "in"};
  auto child = testing::spawn_process(batch_args(args, COREPOOL_CNN10_MODEL), dir.path());
  auto complete = [&] {
    size_t n = 0;
    for (const auto& key : mine) n += fs::exists(dir / ("out/" + key + ".jsonl"));
    return n;
  };
  ASSERT_TRUE(testing::wait_until([&] { return complete() >= 1 || !testing::process_alive(child.pid); },
                                  std::chrono::minutes(3)));
  ::kill(child.pid, SIGKILL);
  const auto killed = testing::wait_process(child, std::chrono::seconds(30));
  ASSERT_EQ(killed.exit_code, -SIGKILL) << "the shard finished before it was killed; make the inputs longer";
  const size_t before = complete();
  ASSERT_LT(before, mine.size());
  std::map<std::string, fs::file_time_type> aged;
  for (const auto& [rel, lines] : results(dir / "out")) {
    ASSERT_TRUE(lines.back().contains("summary")) << rel << " is partial under its final name";
    fs::last_write_time(dir / ("out/" + rel), fs::last_write_time(dir / ("out/" + rel)) - std::chrono::hours(1));
    aged[rel] = fs::last_write_time(dir / ("out/" + rel));
  }

  // The rerun on the small tagger: what is skipped is decided by the result
  // files alone (result_file.h), whichever model wrote them.
  auto rerun = batch(args, dir);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  EXPECT_EQ(complete(), mine.size());
  EXPECT_EQ(results(dir / "out").size(), mine.size()) << "the shard wrote another shard's results";
  for (const auto& [rel, time] : aged) EXPECT_EQ(fs::last_write_time(dir / ("out/" + rel)), time) << rel << " redone";
  const json report = json::parse(testing::read_file(dir / "out/.corepool-shards/0-of-2.json"));
  EXPECT_EQ(report["skipped"].get<size_t>(), before);
  EXPECT_EQ(report["done"].get<size_t>(), mine.size() - before);
  EXPECT_TRUE(fs::exists(foreign)) << "the sweep removed another shard's temp file";
  for (const auto& entry : fs::recursive_directory_iterator(dir / "out")) {
    const std::string p = entry.path().string();
    EXPECT_TRUE(p == foreign || p.find(".tmp.") == std::string::npos) << p;
  }
}

}  // namespace
}  // namespace corepool
