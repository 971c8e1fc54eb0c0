// `corepool batch --format csv|audacity|raven|dcase`, --min-score and
// --merge-gap through the real binary on generated audio. Scores vary a little
// between CPUs, so the bytes of each format are checked at the unit level
// (tests/unit/output_format_test.cc); here the structure of the real output:
// the file and its extension, the header, one row per event of the JSON Lines
// run with the same times and labels, a header once on stdout, reruns that
// skip complete results, the flags' errors; then `corepool eval` on the run's
// own output.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/corepool_cli.h"
#include "tools/audio_synth.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using nlohmann::json;

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  for (std::string field; std::getline(ss, field, sep);) out.push_back(field);
  if (!line.empty() && line.back() == sep) out.emplace_back();
  return out;
}

double number(const std::string& text) { return std::stod(text); }

class BatchOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    synth::write_audio(dir_ / "a.wav", synth::demo_of_seconds(12));
    synth::write_audio(dir_ / "b.wav", synth::demo_of_seconds(8));
  }

  testing::ProcessResult batch(std::vector<std::string> args) {
    args.insert(args.begin(), {"batch", "--model", COREPOOL_DEFAULT_MODEL, "--no-progress"});
    return testing::corepool_cli(args, dir_);
  }

  // The JSON Lines events of `file` (a.wav or b.wav), with the given flags.
  std::vector<json> jsonl_events(const std::string& file, std::vector<std::string> flags = {}) {
    flags.insert(flags.end(), {"--out", "-", dir_ / file});
    const testing::ProcessResult r = batch(flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<json> events;
    for (const std::string& line : testing::lines_of(r.out)) {
      const json j = json::parse(line);
      if (!j.contains("summary")) events.push_back(j);
    }
    return events;
  }

  testing::TempDir dir_;
};

// Each row's start, end and label at the given columns equal the JSON Lines events'.
void expect_rows_are_events(const std::vector<std::vector<std::string>>& rows, const std::vector<json>& events,
                            size_t start, size_t end, size_t label) {
  ASSERT_EQ(rows.size(), events.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_NEAR(number(rows[i].at(start)), events[i]["start"].get<double>(), 1e-6);
    EXPECT_NEAR(number(rows[i].at(end)), events[i]["end"].get<double>(), 1e-6);
    EXPECT_EQ(rows[i].at(label), events[i]["label"].get<std::string>());
  }
}

TEST_F(BatchOutputTest, EachFormatWritesOneFileWithItsExtensionHeaderAndOneRowPerEvent) {
  const std::vector<json> events = jsonl_events("a.wav");
  ASSERT_GE(events.size(), 3u) << "the demo has several parts";
  struct Want {
    std::string format, extension, header;
    char sep;
    size_t columns, start, end, label;
  };
  const std::vector<Want> wants = {
      {"csv", ".csv", "File,Start (s),End (s),Label,Score", ',', 5, 1, 2, 3},
      {"audacity", ".txt", "", '\t', 3, 0, 1, 2},
      {"raven", ".selection.table.txt",
       "Selection\tView\tChannel\tBegin Time (s)\tEnd Time (s)\tLow Freq (Hz)\tHigh Freq (Hz)\tLabel\tScore\t"
       "Begin Path\tFile Offset (s)",
       '\t', 11, 3, 4, 7},
      {"dcase", ".tsv", "filename\tonset\toffset\tevent_label", '\t', 4, 1, 2, 3}};
  for (const Want& w : wants) {
    SCOPED_TRACE(w.format);
    const testing::ProcessResult r = batch({"--format", w.format, "--out", dir_ / "out", dir_ / "a.wav"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> lines = testing::lines_of(testing::read_file(dir_ / ("out/a.wav" + w.extension)));
    if (!w.header.empty()) {
      ASSERT_FALSE(lines.empty());
      EXPECT_EQ(lines.front(), w.header);
      lines.erase(lines.begin());
    }
    std::vector<std::vector<std::string>> rows;
    for (const std::string& line : lines) {
      rows.push_back(split(line, w.sep));
      EXPECT_EQ(rows.back().size(), w.columns) << line;
    }
    expect_rows_are_events(rows, events, w.start, w.end, w.label);
    if (w.format == "raven") {
      for (size_t i = 0; i < rows.size(); ++i) {
        EXPECT_EQ(rows[i][0], std::to_string(i + 1));
        EXPECT_EQ(rows[i][1], "Spectrogram 1");
        EXPECT_EQ(rows[i][6], "8000") << "the model's 16 kHz: Nyquist";
        EXPECT_EQ(rows[i][9], dir_ / "a.wav");
      }
    }
  }
  EXPECT_FALSE(fs::exists(dir_ / "out/a.wav.jsonl")) << "only the asked format is written";
}

TEST_F(BatchOutputTest, OnStdoutAHeaderComesOnceAndRavenNumbersRowsAcrossFiles) {
  const size_t a = jsonl_events("a.wav").size(), b = jsonl_events("b.wav").size();
  testing::ProcessResult r = batch({"--format", "csv", "--out", "-", dir_ / "a.wav", dir_ / "b.wav"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = testing::lines_of(r.out);
  ASSERT_EQ(lines.size(), 1 + a + b);
  EXPECT_EQ(lines[0], "File,Start (s),End (s),Label,Score");
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("a.wav,", 0) == 0; }),
            static_cast<long>(a));

  r = batch({"--format", "raven", "--out", "-", dir_ / "a.wav", dir_ / "b.wav"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  lines = testing::lines_of(r.out);
  ASSERT_EQ(lines.size(), 1 + a + b);
  std::vector<int> numbers;
  for (size_t i = 1; i < lines.size(); ++i) numbers.push_back(std::stoi(split(lines[i], '\t')[0]));
  std::sort(numbers.begin(), numbers.end());
  for (size_t i = 0; i < numbers.size(); ++i) EXPECT_EQ(numbers[i], static_cast<int>(i + 1));
}

TEST_F(BatchOutputTest, ARerunSkipsCompleteResultsOfTheFormatAndForceRedoesThem) {
  const std::string result = dir_ / "out/a.wav.csv";
  ASSERT_EQ(batch({"--format", "csv", "--out", dir_ / "out", dir_ / "a.wav"}).exit_code, 0);
  const std::string written = testing::read_file(result);
  std::ofstream(result) << "marker\n";  // a skipped input leaves it as it is
  ASSERT_EQ(batch({"--format", "csv", "--out", dir_ / "out", dir_ / "a.wav"}).exit_code, 0);
  EXPECT_EQ(testing::read_file(result), "marker\n");
  ASSERT_EQ(batch({"--format", "dcase", "--out", dir_ / "out", dir_ / "a.wav"}).exit_code, 0);
  EXPECT_TRUE(fs::exists(dir_ / "out/a.wav.tsv")) << "another format is another result";
  ASSERT_EQ(batch({"--format", "csv", "--force", "--out", dir_ / "out", dir_ / "a.wav"}).exit_code, 0);
  EXPECT_EQ(testing::read_file(result), written);
  for (const auto& entry : fs::directory_iterator(dir_ / "out")) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

// A result that cannot be renamed into place (a directory holds its name)
// fails alone with its line; the other input's result is committed, and no
// temporary file is left.
TEST_F(BatchOutputTest, AResultThatCannotBeRenamedFailsAloneWithItsLine) {
  fs::create_directories(dir_ / "out/a.wav.jsonl/taken");
  const testing::ProcessResult r = batch({"--out", dir_ / "out", dir_ / "a.wav", dir_ / "b.wav"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("a.wav: " + (dir_ / "out/a.wav.jsonl") + ": cannot rename"));
  EXPECT_EQ(testing::lines_of(r.err).size(), 1u) << "one line, once: " << r.err;
  EXPECT_THAT(testing::read_file(dir_ / "out/b.wav.jsonl"), HasSubstr("\"summary\""));
  EXPECT_TRUE(fs::is_directory(dir_ / "out/a.wav.jsonl/taken"));
  for (const auto& entry : fs::directory_iterator(dir_ / "out")) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

TEST_F(BatchOutputTest, MinScoreKeepsExactlyTheEventsScoringAtLeastIt) {
  const std::vector<json> all = jsonl_events("a.wav");
  std::vector<double> scores;
  for (const json& e : all) scores.push_back(e["score"].get<double>());
  std::sort(scores.begin(), scores.end());
  ASSERT_LT(scores.front(), scores.back()) << "the demo's events score differently";
  // Halfway between the two lowest distinct scores: no rounding of the printed score decides.
  const double low = scores.front();
  const double next = *std::upper_bound(scores.begin(), scores.end(), low);
  const double cut = (low + next) / 2;
  const std::vector<json> kept = jsonl_events("a.wav", {"--min-score", std::to_string(cut)});
  std::vector<json> want;
  std::copy_if(all.begin(), all.end(), std::back_inserter(want),
               [cut](const json& e) { return e["score"].get<double>() >= cut; });
  EXPECT_EQ(json(kept).dump(), json(want).dump());
}

TEST_F(BatchOutputTest, AWideMergeGapLeavesOneEventPerLabelSpanningAllOfIt) {
  const std::vector<json> all = jsonl_events("a.wav");
  std::map<std::string, std::pair<double, double>> span;
  std::map<std::string, double> best;
  for (const json& e : all) {
    const std::string label = e["label"];
    auto [it, fresh] = span.emplace(label, std::make_pair(e["start"].get<double>(), e["end"].get<double>()));
    if (!fresh) it->second.second = std::max(it->second.second, e["end"].get<double>());
    best[label] = std::max(best[label], e["score"].get<double>());
  }
  ASSERT_LT(span.size(), all.size()) << "the demo repeats a label, else nothing would merge";
  const std::vector<json> merged = jsonl_events("a.wav", {"--merge-gap", "1000"});
  ASSERT_EQ(merged.size(), span.size());
  for (const json& e : merged) {
    SCOPED_TRACE(e.dump());
    const auto& [start, end] = span.at(e["label"]);
    EXPECT_DOUBLE_EQ(e["start"].get<double>(), start);
    EXPECT_DOUBLE_EQ(e["end"].get<double>(), end);
    EXPECT_DOUBLE_EQ(e["score"].get<double>(), best.at(e["label"]));
  }
}

TEST_F(BatchOutputTest, BadFormatScoreAndGapValuesAreOneLineAndExit2) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--format", "xml"}, "--format xml: expected one of jsonl, timeline, csv, audacity, raven, dcase"},
      {{"--min-score", "1.5"}, "--min-score 1.5: expected a score from 0 to 1"},
      {{"--min-score", "high"}, "--min-score high: expected a score from 0 to 1"},
      {{"--merge-gap", "-1"}, "--merge-gap -1: expected a number of seconds >= 0"},
      {{"--merge-gap", "nan"}, "--merge-gap nan: expected a number of seconds >= 0"},
      {{"--format", "timeline", "--out", "dir"}, "--format timeline prints to a terminal: it needs --out -"}};
  for (const auto& [flags, message] : cases) {
    SCOPED_TRACE(message);
    std::vector<std::string> args = flags;
    if (std::find(args.begin(), args.end(), "--out") == args.end()) args.insert(args.end(), {"--out", "-"});
    args.push_back(dir_ / "a.wav");
    const testing::ProcessResult r = batch(args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_THAT(r.err, HasSubstr(message));
    EXPECT_EQ(testing::lines_of(r.err).size(), 1u) << r.err;
  }
}

TEST_F(BatchOutputTest, EvalOfTheRunsOwnDcaseOutputAgainstItsJsonLinesIsPerfect) {
  ASSERT_EQ(batch({"--format", "dcase", "--out", dir_ / "ref", dir_ / "a.wav", dir_ / "b.wav"}).exit_code, 0);
  ASSERT_EQ(batch({"--out", dir_ / "res", dir_ / "a.wav", dir_ / "b.wav"}).exit_code, 0);
  const testing::ProcessResult r =
      testing::corepool_cli({"eval", "--json", "--reference", dir_ / "ref", dir_ / "res"}, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["files"], 2);
  for (const char* kind : {"segment_based", "event_based"}) {
    EXPECT_EQ(j[kind]["overall"]["f_measure"], 1.0) << kind;
    EXPECT_EQ(j[kind]["overall"]["error_rate"], 0.0) << kind;
  }
  const testing::ProcessResult missing = testing::corepool_cli({"eval", dir_ / "res"}, dir_);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "corepool eval: give --reference REF_DIR and the results directory\n");
}

}  // namespace
}  // namespace corepool
