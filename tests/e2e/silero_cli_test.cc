// `corepool batch --model build/models/silero-vad` on the 28 s demo (speech
// 0-8 s, music 8-16, noise 16-22, silence 22-28), in thread and process mode:
// speech events come where the speech is and nowhere in the silence, both
// modes write the same events, and the stateful flags are checked. Skipped,
// saying why, when the build found no silero_vad.jit.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/corepool_cli.h"
#include "tests/support/silero_model.h"
#include "tools/audio_synth.h"
#include "tools/sound_classes.h"

namespace corepool {
namespace {

const std::string& kDir = testing::kSileroDir;

struct Span {
  double start = 0, end = 0;
};

// Rows of --format csv: File,Start (s),End (s),Label,Score.
std::vector<Span> speech_of(const std::string& csv) {
  std::vector<Span> spans;
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) f.push_back(cell);
    if (f.size() == 5 && f[3] == "speech") spans.push_back({std::stod(f[1]), std::stod(f[2])});
  }
  return spans;
}

// The demo repeated until it lasts at least `seconds`.
std::vector<float> demo_of_at_least(double seconds) {
  const std::vector<float> demo = synth::demo_samples(16000);
  std::vector<float> out;
  while (out.size() < seconds * 16000) out.insert(out.end(), demo.begin(), demo.end());
  return out;
}

// The names of the regular files in `dir`, sorted.
std::vector<std::string> result_names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file()) names.push_back(entry.path().filename());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class SileroCliTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_SILERO();
    synth::write_samples(dir_.path() + "/demo.wav", synth::demo_samples(16000), 16000);
  }
  std::string demo() const { return dir_.path() + "/demo.wav"; }
  testing::TempDir dir_{"corepool-silero"};
};

TEST_P(SileroCliTest, SpeechEventsComeWhereTheDemoSpeaks) {
  const auto r = testing::corepool_cli(
      {"batch", "--model", kDir, "--mode", GetParam(), "--workers", "2", "--format", "csv", "--out", "-", demo()},
      dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Span> spans = speech_of(r.out);
  ASSERT_FALSE(spans.empty()) << r.out;
  double in_speech = 0;
  for (const Span& s : spans) {
    EXPECT_LT(s.start, 22.0) << "speech event in the demo's silence: " << r.out;
    in_speech += std::max(0.0, std::min(s.end, 8.0) - s.start);
  }
  EXPECT_GT(in_speech, 4.0) << "less than half of the demo's 8 s of speech found: " << r.out;
}

TEST_P(SileroCliTest, TimelineFormatPrintsTheSpeechEvents) {
  const auto r = testing::corepool_cli(
      {"batch", "--model", kDir, "--mode", GetParam(), "--format", "timeline", "--out", "-", demo()}, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("speech"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("28.0 s of audio"), std::string::npos) << r.out;
}

// Lanes change what the model says near each lane's start, so a run that cut
// a file into lanes says so, and a run with --lane-seconds 0 does not.
TEST_P(SileroCliTest, ARunThatCutAFileInLanesSaysSo) {
  const std::string notice = "1 file(s) longer than 10 s ran as lanes (5 s warm-ups)";
  const auto run = [&](const std::string& lane_seconds) {  // at info level, where the notice goes
    return testing::run_process({COREPOOL_BIN, "--log-level", "info", "batch", "--model", kDir, "--mode", GetParam(),
                                 "--lane-seconds", lane_seconds, "--out", "-", demo()},
                                dir_.path());
  };
  const auto laned = run("10");
  ASSERT_EQ(laned.exit_code, 0) << laned.err;
  EXPECT_NE(laned.err.find(notice), std::string::npos) << laned.err;
  const auto whole = run("0");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_EQ(whole.err.find("ran as lanes"), std::string::npos) << whole.err;
}

// Events as csv rows of the demo thrice (84 s, past the 30 s a file is
// decoded whole before it is scored), in one of two ways.
std::string events_of_long_file(const std::string& mode, const std::string& lane_seconds, const std::string& path,
                                const testing::TempDir& dir) {
  const auto r = testing::corepool_cli({"batch", "--model", kDir, "--mode", mode, "--lane-seconds", lane_seconds,
                                        "--format", "csv", "--out", "-", path},
                                       dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

// A long file's split runs while the file decodes, block by block. The
// reference is the other path: lanes longer than the file run the method
// chunk by chunk on the file decoded whole. Same events, to the row.
TEST_P(SileroCliTest, ALongFileScoredWhileItDecodesHasTheEventsOfTheFileRunWhole) {
  const std::string path = dir_.path() + "/long.wav";
  synth::write_samples(path, demo_of_at_least(80), 16000);
  const std::string streamed = events_of_long_file(GetParam(), "0", path, dir_);
  const std::string whole = events_of_long_file(GetParam(), "1000", path, dir_);
  EXPECT_GE(speech_of(streamed).size(), 3u) << streamed;
  EXPECT_EQ(streamed, whole);
}

// A long file found damaged after its first part was scored: one line naming
// it, no result and no temporary file, and the good file beside it done.
TEST_P(SileroCliTest, ALongFileTruncatedPastItsFirstPartFailsAloneWithNoResult) {
  const std::string in = dir_.path() + "/in";
  ASSERT_EQ(::mkdir(in.c_str(), 0755), 0);
  synth::write_samples(in + "/cut.wav", demo_of_at_least(45), 16000);
  synth::write_samples(in + "/good.wav", synth::demo_samples(16000), 16000);
  // 40 s of the 45+ the header states: 16-bit mono after a 44-byte header.
  std::filesystem::resize_file(in + "/cut.wav", 44 + 40 * 16000 * 2);
  const std::string out = dir_.path() + "/out";
  const auto r = testing::corepool_cli({"batch", "--model", kDir, "--mode", GetParam(), "--out", out, in}, dir_);
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("cut.wav"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  EXPECT_EQ(result_names(out), std::vector<std::string>{"good.wav.jsonl"});
}

// A directory's files open several at a time, on every cpu: two bad ones
// among ten good ones each get their line naming the file, every good one its
// result, and no temporary file is left behind.
TEST_P(SileroCliTest, BadFilesAmongGoodOnesEachGetTheirLineAndTheRestTheirResults) {
  const std::string in = dir_.path() + "/in";
  ASSERT_EQ(::mkdir(in.c_str(), 0755), 0);
  for (int i = 0; i < 10; ++i) {
    synth::write_samples(in + "/clip" + std::to_string(i) + ".wav", synth::demo_samples(16000), 16000);
  }
  {
    std::ofstream text(in + "/clip3b.wav");
    text << "not audio at all\n";
    std::ofstream empty(in + "/clip7b.wav");
  }
  const std::string out = dir_.path() + "/out";
  const auto r = testing::corepool_cli({"batch", "--model", kDir, "--mode", GetParam(), "--out", out, in}, dir_);
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("clip3b.wav"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("clip7b.wav"), std::string::npos) << r.err;
  std::vector<std::string> expected;
  for (int i = 0; i < 10; ++i) expected.push_back("clip" + std::to_string(i) + ".wav.jsonl");
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(result_names(out), expected);
}

// Equal files finish together and their results are committed as a group,
// side by side (CommitGroup, from 16 files; 64 files of 3 s made groups of 32
// or 64 here): one result that cannot be renamed into place (a directory
// holds its name) fails alone, with one line naming the file, and the other
// 63 are in place with no temporary file left.
TEST_P(SileroCliTest, AResultThatCannotBeRenamedFailsAloneInItsGroup) {
  const std::string in = dir_.path() + "/in", out = dir_.path() + "/out";
  ASSERT_EQ(::mkdir(in.c_str(), 0755), 0);
  std::vector<float> clip = synth::demo_samples(16000);
  clip.resize(3 * 16000);  // 3 s of speech
  for (int i = 0; i < 64; ++i) synth::write_samples(in + "/clip" + std::to_string(i) + ".wav", clip, 16000);
  std::filesystem::create_directories(out + "/clip13.wav.jsonl/taken");
  const auto r = testing::corepool_cli({"batch", "--model", kDir, "--mode", GetParam(), "--out", out, in}, dir_);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("clip13.wav: " + out + "/clip13.wav.jsonl: cannot rename"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line, once: " << r.err;
  std::vector<std::string> expected;
  for (int i = 0; i < 64; ++i) {
    if (i != 13) expected.push_back("clip" + std::to_string(i) + ".wav.jsonl");
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(result_names(out), expected) << "every other result in place, no temporary file left";
  EXPECT_TRUE(std::filesystem::is_directory(out + "/clip13.wav.jsonl/taken"));
}

INSTANTIATE_TEST_SUITE_P(Modes, SileroCliTest, ::testing::Values("thread", "process"));

TEST(SileroCliFlags, StatefulFlagsOnAStatelessModelAreOneLineErrors) {
  testing::TempDir dir{"corepool-silero-flags"};
  synth::write_samples(dir.path() + "/a.wav", std::vector<float>(16000, 0.0f), 16000);
  const auto r = testing::corepool_cli(
      {"batch", "--model", COREPOOL_DEFAULT_MODEL, "--min-speech-ms", "300", "--out", "-", dir.path() + "/a.wav"}, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--min-speech-ms: only for a stateful model"), std::string::npos) << r.err;
}

// `corepool bench` measures one item per forward(); a stateful model gets one
// line saying so and where its speed is measured, not LibTorch's stack trace
// from a child (exit 4, as it was).
TEST(SileroCliFlags, BenchRefusesAStatefulModelInOneLine) {
  SKIP_WITHOUT_SILERO();
  testing::TempDir dir{"corepool-silero-bench"};
  const auto r = testing::corepool_cli({"bench", "--model", kDir, "--out", dir.path() + "/bench"}, dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("is a stateful model (model.toml [stateful]); bench measures stateless models"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("frame #"), std::string::npos) << r.err;
}

// `corepool tune` timed one stream of a stateful model, whose calls hold one
// chunk: it printed a max_batch that meant nothing. Refused the same way.
TEST(SileroCliFlags, TuneRefusesAStatefulModelInOneLine) {
  SKIP_WITHOUT_SILERO();
  testing::TempDir dir{"corepool-silero-tune"};
  const auto r = testing::corepool_cli({"tune", "--model", kDir}, dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tune: " + kDir + " is a stateful model (model.toml [stateful]); tune measures stateless models"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace corepool
