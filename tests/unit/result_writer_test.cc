// ResultWriter into a result file: the same five fixed events as
// output_format_test.cc, in JSON Lines (the bytes batch has always written:
// the hand-written expected.jsonl) and in csv and raven (the header written
// once at the top, rows numbered from 1 in each file), renamed into place only
// on commit.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "supervisor/batch/result_writer.h"
#include "tests/support/temp_dir.h"

namespace corepool {
namespace {

std::string expected(const std::string& name) {
  std::ifstream in(std::string(COREPOOL_UNIT_TEST_DATA) + "/formats/" + name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Writes the fixed events and a summary through a ResultWriter into `path`.
void write_all(OutputSpec& spec, const std::string& path) {
  ResultWriter writer(spec, "field \"one\", take 2.wav", "/data/field \"one\", take 2.wav",
                      std::make_unique<ResultFile>(path));
  for (const Event& e : std::vector<Event>{{0.0, 8.5, "speech", 0.9987f},
                                           {8.0, 16.5, "music", 1.0f},
                                           {16.0, 22.25, "noise", 0.51234f},
                                           {22.0, 27.9876, "silence", 0.75f},
                                           {24.5, 26.0, "dog, barking", 0.6f}}) {
    writer.event(e);
  }
  writer.summary({{"duration", 28.0}, {"events", 5}});
  CommitGroup group;
  std::string error = "not run";
  writer.commit(group, [&](const std::string& e) { error = e; });
  EXPECT_FALSE(std::filesystem::exists(path)) << "nothing under the final name before the group commits";
  group.commit();
  EXPECT_EQ(error, "");
}

TEST(ResultWriterTest, JsonLinesAreTheBytesBatchHasAlwaysWritten) {
  testing::TempDir dir;
  OutputSpec spec;
  write_all(spec, dir / "r.jsonl");
  EXPECT_EQ(testing::read_file(dir / "r.jsonl"), expected("expected.jsonl"));
}

TEST(ResultWriterTest, CsvAndRavenFilesHaveTheirHeaderOnceAndNoSummary) {
  testing::TempDir dir;
  OutputSpec csv;
  csv.format = OutputFormat::kCsv;
  write_all(csv, dir / "r.csv");
  EXPECT_EQ(testing::read_file(dir / "r.csv"), expected("expected.csv"));

  OutputSpec raven;
  raven.format = OutputFormat::kRaven;
  raven.high_freq_hz = 8000;
  write_all(raven, dir / "r1.selection.table.txt");
  write_all(raven, dir / "r2.selection.table.txt");  // numbered from 1 again: its own table
  EXPECT_EQ(testing::read_file(dir / "r1.selection.table.txt"), expected("expected.selection.table.txt"));
  EXPECT_EQ(testing::read_file(dir / "r2.selection.table.txt"), expected("expected.selection.table.txt"));
}

TEST(ResultWriterTest, AnAbandonedResultLeavesNoFile) {
  testing::TempDir dir;
  OutputSpec spec;
  spec.format = OutputFormat::kDcase;
  {
    ResultWriter writer(spec, "a.wav", "a.wav", std::make_unique<ResultFile>(dir / "a.wav.tsv"));
    writer.event({0, 1, "x", 1.0f});
    writer.abandon();
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace corepool
