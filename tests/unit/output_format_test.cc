// The batch output formats, byte for byte against hand-written files
// (tests/unit/data/formats/): five fixed events of a file whose name has a
// comma and quotes, and a label with a comma, through each format's header and
// event lines. The files were written by hand from the formats' definitions
// (RFC 4180, Audacity's label track, Raven's selection table, the DCASE event
// list), not from this code's output.
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "supervisor/batch/output_format.h"

namespace corepool {
namespace {

std::string read(const std::string& name) {
  std::ifstream in(std::string(COREPOOL_UNIT_TEST_DATA) + "/formats/" + name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const std::vector<Event>& fixed_events() {
  static const std::vector<Event> events = {
      {0.0, 8.5, "speech", 0.9987f},   {8.0, 16.5, "music", 1.0f},  {16.0, 22.25, "noise", 0.51234f},
      {22.0, 27.9876, "silence", 0.75f}, {24.5, 26.0, "dog, barking", 0.6f}};
  return events;
}

std::string written(OutputFormat format) {
  EventRow row;
  row.file = "field \"one\", take 2.wav";
  row.path = "/data/field \"one\", take 2.wav";
  row.high_freq_hz = 8000;
  std::string text = format_header(format);
  for (const Event& e : fixed_events()) {
    text += format_event(format, e, row);
    ++row.selection;
  }
  return text;
}

TEST(OutputFormatTest, CsvMatchesTheHandWrittenFileWithRfc4180Quoting) {
  EXPECT_EQ(written(OutputFormat::kCsv), read("expected.csv"));
}

TEST(OutputFormatTest, AudacityMatchesTheHandWrittenLabelTrack) {
  EXPECT_EQ(written(OutputFormat::kAudacity), read("expected.txt"));
}

TEST(OutputFormatTest, RavenMatchesTheHandWrittenSelectionTable) {
  EXPECT_EQ(written(OutputFormat::kRaven), read("expected.selection.table.txt"));
}

TEST(OutputFormatTest, DcaseMatchesTheHandWrittenEventList) {
  EXPECT_EQ(written(OutputFormat::kDcase), read("expected.tsv"));
}

TEST(OutputFormatTest, EveryNameParsesAndHasItsExtension) {
  const std::vector<std::pair<std::string, std::string>> want = {
      {"jsonl", ".jsonl"}, {"timeline", ""}, {"csv", ".csv"}, {"audacity", ".txt"},
      {"raven", ".selection.table.txt"}, {"dcase", ".tsv"}};
  for (const auto& [name, extension] : want) {
    const auto format = output_format_named(name);
    ASSERT_TRUE(format) << name;
    EXPECT_EQ(result_extension(*format), extension) << name;
  }
  EXPECT_FALSE(output_format_named("xml"));
  EXPECT_FALSE(output_format_named("CSV"));
}

TEST(OutputFormatTest, CsvQuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(csv_field("plain name.wav"), "plain name.wav");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
}

TEST(OutputFormatTest, TabSeparatedFormatsTurnTabsAndLineBreaksIntoSpaces) {
  EventRow row;
  row.file = "a\tb\nc.wav";
  EXPECT_EQ(format_event(OutputFormat::kDcase, {1, 2, "x\ty", 0.5f}, row), "a b c.wav\t1.000\t2.000\tx y\n");
}

}  // namespace
}  // namespace corepool
