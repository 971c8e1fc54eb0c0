// `corepool batch` on what people have rather than what we synthesize: the
// `make run` demo made into FLAC, MP3, Opus, AAC/M4A and MP4 with a video
// track by the ffmpeg command-line tool gives the WAV's events within one hop;
// a damaged MP3 is tagged and its summary says what was read as silence; a
// missing --audio-stream names the file and its stream count. Skipped, with the
// reason, without the ffmpeg tool (scripts/install-deps.sh installs it).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/ffmpeg_cli.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tools/audio_synth.h"
#include "tools/sound_classes.h"
#include "worker/model/model.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using nlohmann::json;

using testing::ffmpeg;
testing::ProcessResult batch(std::vector<std::string> args, const testing::TempDir& dir) {
  args.insert(args.begin(), {COREPOOL_BIN, "--log-level", "warn", "batch", "--model", COREPOOL_DEFAULT_MODEL,
                             "--out", "-", "--no-progress"});
  return testing::run_process(args, dir.path());
}

// Each file's lines, by the name batch gives it (a file named directly: its file name).
std::map<std::string, std::vector<json>> by_file(const std::string& out) {
  std::map<std::string, std::vector<json>> lines;
  for (const std::string& line : testing::lines_of(out)) {
    const json j = json::parse(line);
    lines[j["file"].get<std::string>()].push_back(j);
  }
  return lines;
}

class BatchFormatsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("ffmpeg -version > /dev/null 2>&1") != 0) {
      GTEST_SKIP() << "the ffmpeg command-line tool is not installed (make deps)";
    }
    synth::write_samples(dir_ / "demo.wav", synth::demo_samples(16000), 16000);
  }

  testing::TempDir dir_;
};

// Every event as the WAV's, raw (no --min-score, no --merge-gap): the default
// tagger was trained with lossy-codec variants, so a codec's artefacts do not
// move its decisions. The model before that scored one segment of the Opus
// demo's synthesized music 0.50 noise and failed here.
TEST_F(BatchFormatsTest, TheDemoInEveryFormatGivesTheWavsEventsWithinOneHop) {
  const std::string wav = dir_ / "demo.wav";
  const std::string video = "-f lavfi -i testsrc=duration=28:size=64x48:rate=5 -map 1:v -map 0:a -c:v mpeg4 ";
  const std::map<std::string, std::string> made = {
      {"demo.flac", ""}, {"demo.mp3", "-c:a libmp3lame"}, {"demo.opus", "-c:a libopus"},
      {"demo.m4a", "-c:a aac"}, {"demo.mp4", video + "-c:a aac"}};
  std::vector<std::string> files = {wav};
  for (const auto& [name, options] : made) {
    ASSERT_TRUE(ffmpeg("-i " + wav + " " + options + " " + (dir_ / name))) << name;
    files.push_back(dir_ / name);
  }
  const testing::ProcessResult r = batch(files, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = by_file(r.out);
  const std::vector<json> want = lines.at("demo.wav");
  ASSERT_GE(want.size(), 5u) << "the demo has four parts";
  const double hop = load_model(COREPOOL_DEFAULT_MODEL)->config.hop_seconds;
  for (const auto& [name, options] : made) {
    SCOPED_TRACE(name);
    const std::vector<json>& got = lines[name];
    ASSERT_EQ(got.size(), want.size()) << json(got).dump();
    for (size_t i = 0; i + 1 < want.size(); ++i) {
      EXPECT_EQ(got[i]["label"], want[i]["label"]);
      EXPECT_NEAR(got[i]["start"].get<double>(), want[i]["start"].get<double>(), hop);
      EXPECT_NEAR(got[i]["end"].get<double>(), want[i]["end"].get<double>(), hop);
    }
  }
}

TEST_F(BatchFormatsTest, ADamagedMp3IsTaggedAndItsSummarySaysWhatWasReadAsSilence) {
  const std::string mp3 = dir_ / "demo.mp3";
  ASSERT_TRUE(ffmpeg("-i " + (dir_ / "demo.wav") + " " + mp3));
  std::ifstream in(mp3, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 2000; ++i) bytes[i] = char(bytes[i] ^ 0x5A);
  const std::string damaged = dir_ / "damaged.mp3";
  std::ofstream(damaged, std::ios::binary) << bytes;

  const testing::ProcessResult r = batch({damaged}, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: " + damaged + ": undecodable, read as silence: "));
  const json summary = by_file(r.out).at("damaged.mp3").back().at("summary");
  EXPECT_GT(summary["skipped"]["seconds"].get<double>(), 0.0);
  EXPECT_NEAR(summary["skipped"]["at"][0].get<double>(), 14.0, 2.0);
  EXPECT_NEAR(summary["duration"].get<double>(), 28.0, 0.1);
}

TEST_F(BatchFormatsTest, AMissingAudioStreamNamesTheFileAndHowManyItHas) {
  const std::string wav = dir_ / "demo.wav";
  const testing::ProcessResult r = batch({"--audio-stream", "1", wav}, dir_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: " + wav + ": no audio stream 1: the file has 1 audio stream (--audio-stream 0..0)\n");
}

}  // namespace
}  // namespace corepool
