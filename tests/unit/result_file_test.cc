// Unit tests for supervisor/batch/result_file.h: the temp-then-rename write of a
// batch result, the completeness check used to resume a batch, and the sweep
// of temp files left by dead runs. Each test owns a fresh TempDir;
// TearDown checks that no temp file was left behind, then removes it.
#include "supervisor/batch/result_file.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ResultFileTest : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_EQ(temp_files(), std::vector<std::string>{}) << "temp files left behind";
  }

  // Every file under dir_ whose name carries the ".tmp." mark.
  std::vector<std::string> temp_files() const {
    std::vector<std::string> found;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().filename().string().find(".tmp.") != std::string::npos) {
        found.push_back(it->path().string());
      }
    }
    return found;
  }

  std::string path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  static void write_text(const std::string& file, const std::string& text) {
    fs::create_directories(fs::path(file).parent_path());
    std::ofstream(file, std::ios::binary) << text;
  }

  static std::vector<std::string> read_lines(const std::string& file) {
    std::ifstream in(file);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  testing::TempDir temp_{"corepool-result"};
  const std::string dir_ = temp_.path();
};

// The same fixture, named after what its tests check.
class ResultIsCompleteTest : public ResultFileTest {};
class ResultSweepTest : public ResultFileTest {};

TEST_F(ResultFileTest, NothingExistsUnderTheFinalNameBeforeCommit) {
  const std::string final_path = path("out.jsonl");
  ResultFile result(final_path);
  result.write_line({{"event", "dog"}});
  EXPECT_EQ(result.final_path(), final_path);
  EXPECT_EQ(result.temp_path(), final_path + ".tmp." + std::to_string(::getpid()));
  EXPECT_TRUE(fs::exists(result.temp_path()));
  EXPECT_FALSE(fs::exists(final_path));
  result.abandon();
}

TEST_F(ResultFileTest, ACommittedFileHoldsOneJsonLinePerWrite) {
  const std::string final_path = path("out.jsonl");
  {
    ResultFile result(final_path);
    result.write_line({{"start", 0.5}, {"label", "dog"}});
    result.write_line({{"start", 1.5}, {"label", "cat"}});
    result.write_line({{"summary", {{"events", 2}}}});
    result.commit();
    EXPECT_FALSE(fs::exists(result.temp_path()));
  }
  const std::vector<std::string> lines = read_lines(final_path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(json::parse(lines[0]), (json{{"start", 0.5}, {"label", "dog"}}));
  EXPECT_EQ(json::parse(lines[1]), (json{{"start", 1.5}, {"label", "cat"}}));
  EXPECT_EQ(json::parse(lines[2]), (json{{"summary", {{"events", 2}}}}));
  EXPECT_TRUE(result_is_complete(final_path));
}

TEST_F(ResultFileTest, MissingParentDirectoriesAreCreated) {
  const std::string final_path = path("a/b/c/out.jsonl");
  ResultFile result(final_path);
  result.write_line({{"summary", {}}});
  result.commit();
  EXPECT_EQ(read_lines(final_path).size(), 1u);
}

TEST_F(ResultFileTest, CommitReplacesAnOlderResult) {
  const std::string final_path = path("out.jsonl");
  write_text(final_path, "{\"old\": true}\n{\"old\": true}\n");
  ResultFile result(final_path);
  result.write_line({{"summary", 1}});
  result.commit();
  EXPECT_EQ(read_lines(final_path), std::vector<std::string>{"{\"summary\":1}"});
}

// A commit with `later` renames into place at once and leaves the directory's
// fsync to later.sync(): three results in two directories pend two syncs,
// which one sync() does; a commit without `later` pends nothing.
TEST_F(ResultFileTest, ACommitWithLaterIsInPlaceAndPendsItsDirectoryOnce) {
  DirectorySyncs later;
  for (const std::string name : {"a/one.jsonl", "a/two.jsonl", "b/three.jsonl"}) {
    ResultFile result(path(name));
    result.write_line({{"summary", name}});
    result.commit(&later);
    EXPECT_EQ(read_lines(path(name)).size(), 1u) << name << " is not in place before the sync";
  }
  EXPECT_EQ(later.pending(), 2u);
  later.sync();
  EXPECT_EQ(later.pending(), 0u);
  ResultFile alone(path("c/four.jsonl"));
  alone.write_line({{"summary", 4}});
  alone.commit();
  EXPECT_EQ(later.pending(), 0u);
  later.add_parent_of("relative.jsonl");  // no directory in the path: the current one
  EXPECT_EQ(later.pending(), 1u);
  later.sync();
  EXPECT_EQ(later.pending(), 0u);
}

// A group commits nothing until commit(): then every file is in place with
// its own lines, its temp file gone, and each done has run once, with no
// error, in the order the files were added (enough files, in three
// directories, for several threads to rename at once).
TEST_F(ResultFileTest, ACommitGroupPutsEveryFileInPlaceOnlyWhenItCommits) {
  constexpr int kFiles = std::max<int>(3 * CommitGroup::kThreads, CommitGroup::kParallelFrom) + 1;
  std::vector<std::unique_ptr<ResultFile>> results;
  std::vector<std::string> done_order;
  CommitGroup group;
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = std::string(1, static_cast<char>('a' + i % 3)) + "/" + std::to_string(i) + ".jsonl";
    results.push_back(std::make_unique<ResultFile>(path(name)));
    results.back()->write_line({{"summary", i}});
    group.add(*results.back(), [&done_order, name](const std::string& error) {
      EXPECT_EQ(error, "") << name;
      done_order.push_back(name);
    });
  }
  EXPECT_EQ(group.size(), static_cast<size_t>(kFiles));
  EXPECT_EQ(temp_files().size(), static_cast<size_t>(kFiles));
  for (int i = 0; i < kFiles; ++i) {
    EXPECT_FALSE(fs::exists(results[i]->final_path())) << i << " is in place before the group commits";
  }
  EXPECT_TRUE(done_order.empty());
  group.commit();
  EXPECT_EQ(group.size(), 0u);
  ASSERT_EQ(done_order.size(), static_cast<size_t>(kFiles));
  for (int i = 0; i < kFiles; ++i) {
    EXPECT_EQ(path(done_order[i]), results[i]->final_path());
    EXPECT_EQ(read_lines(results[i]->final_path()), std::vector<std::string>{"{\"summary\":" + std::to_string(i) + "}"});
  }
  group.commit();  // empty: nothing runs twice
  EXPECT_EQ(done_order.size(), static_cast<size_t>(kFiles));
}

// A file the group cannot rename into place (a directory holds its final
// name) fails alone: its done gets the error naming it, its temp file is
// removed, and the files around it are committed.
TEST_F(ResultFileTest, AFileTheGroupCannotCommitFailsAlone) {
  fs::create_directories(path("taken.jsonl/inside"));
  CommitGroup group;
  std::vector<std::unique_ptr<ResultFile>> results;
  std::vector<std::string> errors(3, "not run");
  for (const std::string name : {"before.jsonl", "taken.jsonl", "after.jsonl"}) {
    results.push_back(std::make_unique<ResultFile>(path(name)));
    results.back()->write_line({{"summary", name}});
    const size_t i = results.size() - 1;
    group.add(*results.back(), [&errors, i](const std::string& error) { errors[i] = error; });
  }
  group.commit();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[2], "");
  EXPECT_NE(errors[1].find(path("taken.jsonl") + ": cannot rename"), std::string::npos) << errors[1];
  EXPECT_EQ(read_lines(path("before.jsonl")).size(), 1u);
  EXPECT_EQ(read_lines(path("after.jsonl")).size(), 1u);
  EXPECT_TRUE(fs::is_directory(path("taken.jsonl/inside")));
}

TEST_F(ResultFileTest, DestroyingWithoutCommitLeavesNothingBehind) {
  const std::string final_path = path("sub/out.jsonl");
  {
    ResultFile result(final_path);
    result.write_line({{"event", "dog"}});
    ASSERT_TRUE(fs::exists(result.temp_path()));
  }
  EXPECT_FALSE(fs::exists(final_path));
  EXPECT_TRUE(fs::is_empty(path("sub")));
}

TEST_F(ResultFileTest, AbandonRemovesTheTempFileAndForbidsFurtherWrites) {
  ResultFile result(path("out.jsonl"));
  result.write_line({{"event", "dog"}});
  result.abandon();
  EXPECT_FALSE(fs::exists(result.temp_path()));
  EXPECT_FALSE(fs::exists(result.final_path()));
  EXPECT_THROW(result.write_line({{"event", "cat"}}), std::logic_error);
  EXPECT_THROW(result.commit(), std::logic_error);
  result.abandon();  // a second abandon is harmless
}

TEST_F(ResultFileTest, AbandonAfterCommitKeepsTheResult) {
  ResultFile result(path("out.jsonl"));
  result.write_line({{"summary", 0}});
  result.commit();
  result.abandon();
  EXPECT_TRUE(fs::exists(result.final_path()));
  EXPECT_THROW(result.write_line({{"late", true}}), std::logic_error);
}

TEST_F(ResultFileTest, ALinkPlantedAtTheTempNameIsNotFollowed) {
  const std::string final_path = path("out.jsonl");
  write_text(path("victim"), "precious");
  const std::string link = final_path + ".tmp." + std::to_string(::getpid());
  fs::create_symlink(path("victim"), link);
  EXPECT_THROW(ResultFile result(final_path), std::runtime_error);
  EXPECT_EQ(read_lines(path("victim")), std::vector<std::string>{"precious"});
  fs::remove(link);
}

TEST_F(ResultFileTest, AnUncreatableLocationThrowsNamingThePath) {
  write_text(path("blocker"), "a file where a directory should be");
  const std::string final_path = path("blocker/out.jsonl");
  try {
    ResultFile result(final_path);
    FAIL() << "a file cannot be a parent directory";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(final_path + ": cannot create result file: ", 0), 0u)
        << e.what();
  }
}

TEST_F(ResultIsCompleteTest, AFileEndingInASummaryLineIsComplete) {
  write_text(path("r.jsonl"), "{\"start\":0}\n{\"summary\":{\"events\":1}}\n");
  EXPECT_TRUE(result_is_complete(path("r.jsonl")));
}

TEST_F(ResultIsCompleteTest, TrailingBlankLinesAndAMissingNewlineAreIgnored) {
  write_text(path("blank.jsonl"), "{\"start\":0}\n{\"summary\":1}\n\n  \r\n\n");
  write_text(path("no_newline.jsonl"), "{\"start\":0}\n{\"summary\":1}");
  write_text(path("one_line.jsonl"), "{\"summary\":1}");
  EXPECT_TRUE(result_is_complete(path("blank.jsonl")));
  EXPECT_TRUE(result_is_complete(path("no_newline.jsonl")));
  EXPECT_TRUE(result_is_complete(path("one_line.jsonl")));
}

TEST_F(ResultIsCompleteTest, MissingEmptyOrBlankFilesAreNotComplete) {
  write_text(path("empty.jsonl"), "");
  write_text(path("blank.jsonl"), "\n\n \n");
  write_text(path("good.jsonl"), "{\"summary\":1}\n");
  ASSERT_TRUE(result_is_complete(path("good.jsonl"))) << "control";
  EXPECT_FALSE(result_is_complete(path("missing.jsonl")));
  EXPECT_FALSE(result_is_complete(path("empty.jsonl")));
  EXPECT_FALSE(result_is_complete(path("blank.jsonl")));
  EXPECT_FALSE(result_is_complete(dir_)) << "a directory is not a result";
}

TEST_F(ResultIsCompleteTest, GarbageOrATruncatedSummaryIsNotCompleteUnlessASummaryFollows) {
  const std::string garbage = "\x01\x02 not json at all \xff\n";
  const std::string truncated = "{\"start\":0}\n{\"summary\":{\"events\":";
  write_text(path("garbage.jsonl"), garbage);
  write_text(path("truncated.jsonl"), truncated);
  write_text(path("garbage_then_summary.jsonl"), garbage + "{\"summary\":1}\n");
  write_text(path("truncated_then_summary.jsonl"), truncated + "\n{\"summary\":1}\n");
  EXPECT_FALSE(result_is_complete(path("garbage.jsonl")));
  EXPECT_FALSE(result_is_complete(path("truncated.jsonl")));
  EXPECT_TRUE(result_is_complete(path("garbage_then_summary.jsonl")));
  EXPECT_TRUE(result_is_complete(path("truncated_then_summary.jsonl")));
}

TEST_F(ResultIsCompleteTest, OnlyTheLastLineCountsAndItMustBeAnObjectWithSummary) {
  write_text(path("summary_not_last.jsonl"), "{\"summary\":1}\n{\"start\":0}\n");
  write_text(path("array.jsonl"), "{\"start\":0}\n[\"summary\"]\n");
  write_text(path("string.jsonl"), "{\"start\":0}\n\"summary\"\n");
  write_text(path("nested.jsonl"), "{\"start\":0}\n{\"x\":{\"summary\":1}}\n");
  write_text(path("null_summary.jsonl"), "[\"summary\"]\n{\"summary\":null}\n");
  EXPECT_TRUE(result_is_complete(path("null_summary.jsonl"))) << "the key is the mark";
  EXPECT_FALSE(result_is_complete(path("summary_not_last.jsonl")));
  EXPECT_FALSE(result_is_complete(path("array.jsonl")));
  EXPECT_FALSE(result_is_complete(path("string.jsonl")));
  EXPECT_FALSE(result_is_complete(path("nested.jsonl")));
}

TEST_F(ResultIsCompleteTest, ASummaryLineLongerThanOneReadIsFound) {
  const std::string long_value(300 * 1000, 'x');  // several 64 KiB windows
  write_text(path("r.jsonl"), "{\"start\":0}\n{\"summary\":\"" + long_value + "\"}\n");
  EXPECT_TRUE(result_is_complete(path("r.jsonl")));
}

// Bytes the process has read through read()/pread(), from /proc/self/io.
long long bytes_read_so_far() {
  std::ifstream io("/proc/self/io");
  std::string key;
  long long value = -1;
  while (io >> key >> value) {
    if (key == "rchar:") return value;
  }
  return -1;
}

TEST_F(ResultIsCompleteTest, OnlyTheEndOfALargeResultIsRead) {
  std::ostringstream text;
  for (int i = 0; i < 200000; ++i) text << "{\"start\":" << i << ",\"label\":\"dog\"}\n";
  text << "{\"summary\":{\"events\":200000}}\n";
  write_text(path("big.jsonl"), text.str());
  ASSERT_GT(fs::file_size(path("big.jsonl")), 5u * 1000 * 1000);

  const long long before = bytes_read_so_far();
  ASSERT_GE(before, 0) << "/proc/self/io is needed to count the bytes read (CONFIG_TASK_IO_ACCOUNTING)";
  EXPECT_TRUE(result_is_complete(path("big.jsonl")));
  const long long read = bytes_read_so_far() - before;
  EXPECT_LT(read, 1000 * 1000) << "read " << read << " bytes of a 5+ MB file";
}

TEST_F(ResultSweepTest, TempFilesOfADeadProcessAreRemovedAtAnyDepth) {
  const std::string suffix = ".tmp." + std::to_string(testing::dead_pid());
  write_text(path("top.jsonl" + suffix), "{}\n");
  write_text(path("a/b/deep.jsonl" + suffix), "{}\n");
  write_text(path("a/b/final.jsonl"), "{\"summary\":1}\n");

  EXPECT_EQ(sweep_stale_temp_files(dir_), 2);
  EXPECT_FALSE(fs::exists(path("top.jsonl" + suffix)));
  EXPECT_FALSE(fs::exists(path("a/b/deep.jsonl" + suffix)));
  EXPECT_TRUE(fs::exists(path("a/b/final.jsonl")));
}

TEST_F(ResultSweepTest, TempFilesOfALiveProcessAreKept) {
  ResultFile live(path("sub/out.jsonl"));  // this process: alive by definition
  live.write_line({{"event", "dog"}});
  EXPECT_EQ(sweep_stale_temp_files(dir_), 0);
  EXPECT_TRUE(fs::exists(live.temp_path()));
  live.write_line({{"summary", 1}});
  live.commit();
  EXPECT_TRUE(result_is_complete(live.final_path()));
}

TEST_F(ResultSweepTest, NamesThatOnlyLookLikeTempFilesAreKept) {
  const std::vector<std::string> names = {"a.tmp.",     "a.tmp.12x", "a.tmp.-5",
                                          "a.tmp.0",    "a.tmp",     "a.tmp.99999999999",
                                          "a.tmp.1.bak", "plain.jsonl"};
  for (const std::string& name : names) write_text(path("look/" + name), "{}\n");
  const std::string stale = path("look/a.tmp." + std::to_string(testing::dead_pid()));
  write_text(stale, "{}\n");
  EXPECT_EQ(sweep_stale_temp_files(dir_), 1);
  EXPECT_FALSE(fs::exists(stale));
  for (const std::string& name : names) EXPECT_TRUE(fs::exists(path("look/" + name))) << name;
  fs::remove_all(path("look"));  // keeps TearDown's residue check about real leaks
}

TEST_F(ResultSweepTest, ASecondSweepOrASweepOfAMissingDirectoryRemovesNothing) {
  write_text(path("out.jsonl.tmp." + std::to_string(testing::dead_pid())), "{}\n");
  EXPECT_EQ(sweep_stale_temp_files(dir_), 1);
  EXPECT_EQ(sweep_stale_temp_files(dir_), 0);
  EXPECT_EQ(sweep_stale_temp_files(path("does/not/exist")), 0);
}

}  // namespace
}  // namespace corepool
