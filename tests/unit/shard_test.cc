// Unit tests for supervisor/batch/shard.h: the FNV-1a hash and the split it makes
// (every input in exactly one shard, the same split whatever the order or the
// other directories), --shard parsing, the Slurm / Indexed Job variables, and
// the temp-file sweep that only touches its own shard's results.
#include "supervisor/batch/shard.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "supervisor/batch/inputs.h"
#include "supervisor/batch/manifest.h"
#include "supervisor/batch/result_file.h"
#include "tests/support/process.h"
#include "tests/support/scratch_dir_test.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ShardError& e) {
    return e.what();
  }
  return "(no ShardError thrown)";
}

std::vector<std::string> many_keys() {
  std::vector<std::string> keys;
  for (int i = 0; i < 600; ++i) {
    keys.push_back("dir" + std::to_string(i % 7) + "/sub" + std::to_string(i % 3) + "/take " +
                   std::to_string(i) + ".wav");
  }
  return keys;
}

TEST(ShardHashTest, Fnv1a64MatchesThePublishedTestVectors) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
}

// Pinned values: a change here re-deals every running sharded batch.
TEST(ShardHashTest, TheShardOfAKeyIsTheSameInEveryVersion) {
  EXPECT_EQ(shard_of("recordings/2024/a.wav", 16), 10u);
  EXPECT_EQ(shard_of("b.flac", 16), 7u);
  EXPECT_EQ(shard_of("sub/dir/c.ogg", 3), 0u);
  EXPECT_EQ(shard_of("anything", 1), 0u);
}

TEST(ShardSplitTest, EveryFileLandsInExactlyOneShardForOneToSixteenShards) {
  const std::vector<std::string> keys = many_keys();
  for (uint32_t n = 1; n <= 16; ++n) {
    std::vector<size_t> per_shard(n, 0);
    for (const std::string& key : keys) {
      int owners = 0;
      for (uint32_t i = 0; i < n; ++i) {
        const ShardSpec shard{i, n, "test"};
        if (shard.owns(key)) {
          ++owners;
          ++per_shard[i];
        }
      }
      EXPECT_EQ(owners, 1) << key << " with " << n << " shards";
    }
    for (uint32_t i = 0; i < n; ++i) {
      EXPECT_GT(per_shard[i], 0u) << "shard " << i << "/" << n << " got nothing of " << keys.size();
    }
  }
}

class ShardInputsTest : public testing::ScratchDirTest {
 protected:
  void touch(const std::string& name) {
    fs::create_directories(fs::path(path(name)).parent_path());
    std::ofstream(path(name)) << "x";
  }
  static std::map<std::string, uint32_t> assignment(const InputList& list, uint32_t n) {
    std::map<std::string, uint32_t> out;
    for (const BatchInput& in : list.inputs) out[in.relative] = shard_of(in.relative, n);
    return out;
  }
};

TEST_F(ShardInputsTest, AddingFilesInOtherDirectoriesChangesNoAssignment) {
  for (int i = 0; i < 20; ++i) touch("data/a/" + std::to_string(i) + ".wav");
  const auto before = assignment(expand_inputs({path("data")}), 5);
  ASSERT_EQ(before.size(), 20u);
  for (int i = 0; i < 20; ++i) touch("data/b/" + std::to_string(i) + ".flac");
  for (int i = 0; i < 5; ++i) touch("data/z/deep/" + std::to_string(i) + ".wav");
  const auto after = assignment(expand_inputs({path("data")}), 5);
  EXPECT_EQ(after.size(), 45u);
  for (const auto& [key, shard] : before) EXPECT_EQ(after.at(key), shard) << key;
}

TEST_F(ShardInputsTest, AManifestInAnyOrderWithARootSplitsLikeTheDirectory) {
  for (int i = 0; i < 30; ++i) touch("data/" + std::string(i % 2 ? "a/" : "b/c/") + std::to_string(i) + ".wav");
  const InputList walked = expand_inputs({path("data")});
  std::vector<std::string> lines;
  for (const BatchInput& in : walked.inputs) lines.push_back(in.path);
  std::shuffle(lines.begin(), lines.end(), std::mt19937(7));
  {
    std::ofstream m(path("files.txt"));
    for (const std::string& line : lines) m << line << "\n";
  }
  const InputList listed = expand_inputs({}, read_manifest(path("files.txt"), path("data")));
  EXPECT_TRUE(listed.errors.empty());
  EXPECT_EQ(assignment(listed, 4), assignment(walked, 4));
}

TEST(ShardParseTest, IOverNIsAccepted) {
  const ShardSpec s = parse_shard("3/8");
  EXPECT_EQ(s.index, 3u);
  EXPECT_EQ(s.count, 8u);
  EXPECT_TRUE(s.sharded());
  EXPECT_FALSE(parse_shard("0/1").sharded());
}

TEST(ShardParseTest, BadValuesAreRejectedNamingTheValue) {
  EXPECT_THAT(error_of([] { parse_shard("3/2"); }), HasSubstr("--shard '3/2': the shard index must be below"));
  EXPECT_THAT(error_of([] { parse_shard("2/2"); }), HasSubstr("numbered 0..1"));
  EXPECT_THAT(error_of([] { parse_shard("0/0"); }), HasSubstr("--shard '0/0': the shard count must be"));
  for (const char* junk : {"junk", "1/", "/3", "-1/3", "1/3x", " 1/3", "1/+3", "1.0/3", "1/99999999999999999999"}) {
    EXPECT_THAT(error_of([junk] { parse_shard(junk); }), HasSubstr(std::string("--shard '") + junk + "'")) << junk;
  }
}

TEST(ShardEnvironmentTest, NoFlagAndNoSchedulerMeansTheWholeInputSet) {
  const ShardSpec s = resolve_shard("", env_of({}));
  EXPECT_EQ(s.index, 0u);
  EXPECT_EQ(s.count, 1u);
}

TEST(ShardEnvironmentTest, ASlurmArrayTaskIsItsShard) {
  const ShardSpec s = resolve_shard("", env_of({{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_COUNT", "5"}}));
  EXPECT_EQ(s.name(), "2/5");
  EXPECT_EQ(s.source, "SLURM_ARRAY_TASK_ID");
}

TEST(ShardEnvironmentTest, CorepoolShardCountOverridesTheArraySizeToRerunOneTask) {
  const ShardSpec s = resolve_shard("", env_of({{"SLURM_ARRAY_TASK_ID", "6"}, {"SLURM_ARRAY_TASK_COUNT", "1"},
                                                {"COREPOOL_SHARD_COUNT", "8"}}));
  EXPECT_EQ(s.name(), "6/8");
}

TEST(ShardEnvironmentTest, AnIndexedJobNeedsCorepoolShardCount) {
  EXPECT_EQ(resolve_shard("", env_of({{"JOB_COMPLETION_INDEX", "1"}, {"COREPOOL_SHARD_COUNT", "4"}})).name(), "1/4");
  EXPECT_THAT(error_of([] { resolve_shard("", env_of({{"JOB_COMPLETION_INDEX", "1"}})); }),
              HasSubstr("JOB_COMPLETION_INDEX is set (1) but COREPOOL_SHARD_COUNT is not"));
}

TEST(ShardEnvironmentTest, TheFlagWinsOverTheScheduler) {
  EXPECT_EQ(resolve_shard("1/3", env_of({{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_COUNT", "5"}})).name(),
            "1/3");
}

TEST(ShardEnvironmentTest, BadSchedulerValuesAreNamed) {
  EXPECT_THAT(error_of([] {
                resolve_shard("", env_of({{"SLURM_ARRAY_TASK_ID", "x1"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}));
              }),
              HasSubstr("SLURM_ARRAY_TASK_ID='x1': not a whole number"));
  EXPECT_THAT(error_of([] {
                resolve_shard("", env_of({{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}));
              }),
              HasSubstr("SLURM_ARRAY_TASK_ID=4: the shard index must be below the count 4 (SLURM_ARRAY_TASK_COUNT)"));
  EXPECT_THAT(error_of([] {
                resolve_shard("", env_of({{"JOB_COMPLETION_INDEX", "0"}, {"COREPOOL_SHARD_COUNT", "0"}}));
              }),
              HasSubstr("COREPOOL_SHARD_COUNT=0: the shard count must be"));
}

// The real environment, not a map: what `corepool batch` itself reads.
TEST(ShardEnvironmentTest, TheProcessEnvironmentIsRead) {
  ::setenv("JOB_COMPLETION_INDEX", "3", 1);
  ::setenv("COREPOOL_SHARD_COUNT", "7", 1);
  const ShardSpec s = resolve_shard("", process_environment());
  ::unsetenv("JOB_COMPLETION_INDEX");
  ::unsetenv("COREPOOL_SHARD_COUNT");
  EXPECT_EQ(s.name(), "3/7");
  EXPECT_FALSE(resolve_shard("", process_environment()).sharded());
}

class ShardSweepTest : public testing::ScratchDirTest {};

// Shards on other hosts write into the same directory: a pid that is dead here
// may be alive there, so a shard must leave other shards' temp files alone.
TEST_F(ShardSweepTest, ASweepOnlyRemovesTheTempFilesOfItsOwnShard) {
  const ShardSpec mine{0, 3, "test"};
  std::string own_key, other_key;
  for (int i = 0; own_key.empty() || other_key.empty(); ++i) {
    const std::string key = "sub/" + std::to_string(i) + ".wav";
    (mine.owns(key) ? own_key : other_key) = key;
  }
  const std::string tmp = ".jsonl.tmp." + std::to_string(testing::dead_pid());
  fs::create_directories(path("out/sub"));
  std::ofstream(path("out/" + own_key + tmp)) << "{}\n";
  std::ofstream(path("out/" + other_key + tmp)) << "{}\n";
  auto owned = [&mine](const std::string& relative) {
    return relative.size() > 6 && mine.owns(relative.substr(0, relative.size() - 6));
  };
  EXPECT_EQ(sweep_stale_temp_files(path("out") + "/", owned), 1);
  EXPECT_FALSE(fs::exists(path("out/" + own_key + tmp)));
  EXPECT_TRUE(fs::exists(path("out/" + other_key + tmp)));
}

}  // namespace
}  // namespace corepool
