// `corepool batch` end to end, through the real binary: a long generated file
// and a directory with corrupt files in it, reruns, stdout mode, determinism
// across thread counts, agreement with an in-process reference pipeline,
// bounded memory on long files, and the exit-code contract.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tools/audio_synth.h"
#include "audio/audio_stream.h"
#include "worker/engine.h"
#include "audio/events.h"
#include "audio/segmenter.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using nlohmann::json;


testing::ProcessResult corepool(std::vector<std::string> args, const testing::TempDir& dir) {
  const bool has_model = std::find(args.begin(), args.end(), "--model") != args.end();
  if (!has_model) args.insert(args.begin(), {"--model", COREPOOL_DEFAULT_MODEL});
  args.insert(args.begin(), {COREPOOL_BIN, "--log-level", "warn", "batch"});
  args.push_back("--no-progress");
  return testing::run_process(args, dir.path());
}

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> out;
  for (const auto& line : testing::lines_of(text)) out.push_back(json::parse(line));
  return out;
}

// Checks the shape of one result: events ordered by start, inside the file,
// then exactly one summary line at the end.
void expect_well_formed(const std::vector<json>& lines, double duration) {
  ASSERT_FALSE(lines.empty());
  ASSERT_TRUE(lines.back().contains("summary"));
  EXPECT_NEAR(lines.back()["summary"]["duration"].get<double>(), duration, 0.01);
  double last_start = -1;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    const json& e = lines[i];
    ASSERT_FALSE(e.contains("summary"));
    EXPECT_GE(e["start"].get<double>(), last_start);
    EXPECT_LT(e["start"].get<double>(), e["end"].get<double>());
    EXPECT_LE(e["end"].get<double>(), duration + 1e-3);
    last_start = e["start"].get<double>();
  }
}

// The same file through the pipeline stages called in-process, one segment at a time.
std::vector<Event> reference_events(const std::string& path) {
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  const ModelConfig& cfg = model->config;
  Engine engine(model);
  std::vector<Event> events;
  EventBuilder builder(cfg.labels, cfg.thresholds, cfg.segment_seconds, cfg.hop_seconds,
                       [&](const Event& e) { events.push_back(e); }, cfg.quiet_index());
  AudioStream stream(path, cfg.sample_rate);
  Segmenter segmenter(cfg.segment_samples(), cfg.hop_samples());
  std::vector<float> block;
  Segment s;
  auto run = [&] { builder.add(s.index, engine.infer({s.samples.data()})[0]); };
  while (stream.read(block)) {
    segmenter.push(block.data(), block.size());
    block.clear();
    while (segmenter.next(s)) run();
  }
  while (segmenter.finish(s)) run();
  builder.finish(segmenter.segments_emitted(), double(segmenter.samples_pushed()) / cfg.sample_rate);
  return events;
}

TEST(BatchCliTest, LongFileAndACorruptDirectoryGiveResultsErrorsAndExitOne) {
  testing::TempDir dir;
  synth::write_audio(dir / "long.wav", synth::demo_of_seconds(600));
  fs::create_directories(dir / "in/sub");
  synth::write_audio(dir / "in/good.flac", synth::demo_of_seconds(30, 44100));
  synth::write_audio(dir / "in/sub/stereo.wav", [] { auto s = synth::demo_of_seconds(20, 22050); s.channels = 2; return s; }());
  std::ofstream(dir / "in/broken.wav") << "RIFF but not really a wave file";
  std::ofstream(dir / "in/notes.txt") << "not audio, not an audio extension: ignored";

  auto r = corepool({"--out", dir / "out", dir / "long.wav", dir / "in"}, dir);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(dir / "in/broken.wav"));
  EXPECT_EQ(testing::lines_of(r.err).size(), 1u) << r.err;  // one line for the one bad file

  expect_well_formed(json_lines(testing::read_file(dir / "out/long.wav.jsonl")),
                     synth::duration_seconds(synth::demo_of_seconds(600)));
  expect_well_formed(json_lines(testing::read_file(dir / "out/good.flac.jsonl")),
                     synth::duration_seconds(synth::demo_of_seconds(30)));
  expect_well_formed(json_lines(testing::read_file(dir / "out/sub/stereo.wav.jsonl")),
                     synth::duration_seconds(synth::demo_of_seconds(20)));
  EXPECT_FALSE(fs::exists(dir / "out/broken.wav.jsonl"));
  for (const auto& entry : fs::recursive_directory_iterator(dir / "out")) {
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

TEST(BatchCliTest, EventsMatchTheInProcessReferencePipeline) {
  testing::TempDir dir;
  synth::write_audio(dir / "a.wav", synth::demo_of_seconds(60, 32000));
  auto r = corepool({"--workers", "2", "--max-batch", "3", "--out", dir / "out", dir / "a.wav"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> lines = json_lines(testing::read_file(dir / "out/a.wav.jsonl"));
  std::vector<Event> expected = reference_events(dir / "a.wav");
  ASSERT_EQ(lines.size(), expected.size() + 1);
  ASSERT_GT(expected.size(), 0u);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(lines[i]["label"], expected[i].label) << i;
    EXPECT_NEAR(lines[i]["start"].get<double>(), expected[i].start, 1e-3) << i;
    EXPECT_NEAR(lines[i]["end"].get<double>(), expected[i].end, 1e-3) << i;
    EXPECT_NEAR(lines[i]["score"].get<double>(), expected[i].score, 1e-3) << i;
  }
}

TEST(BatchCliTest, OneAndTwoEngineThreadsWriteIdenticalResults) {
  testing::TempDir dir;
  synth::write_audio(dir / "a.wav", synth::demo_of_seconds(90));
  auto one = corepool({"--workers", "1", "--out", "-", dir / "a.wav"}, dir);
  auto two = corepool({"--workers", "2", "--out", "-", dir / "a.wav"}, dir);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_EQ(two.exit_code, 0) << two.err;
  auto a = json_lines(one.out), b = json_lines(two.out);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i + 1 < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << i;  // all but timing
  EXPECT_EQ(a.back()["summary"]["segments"], b.back()["summary"]["segments"]);
}

TEST(BatchCliTest, ARerunSkipsCompleteResultsUnlessForced) {
  testing::TempDir dir;
  synth::write_audio(dir / "a.wav", synth::demo_of_seconds(10));
  ASSERT_EQ(corepool({"--out", dir / "out", dir / "a.wav"}, dir).exit_code, 0);
  const auto first = fs::last_write_time(dir / "out/a.wav.jsonl");
  fs::last_write_time(dir / "out/a.wav.jsonl", first - std::chrono::hours(1));
  const auto aged = fs::last_write_time(dir / "out/a.wav.jsonl");
  ASSERT_EQ(corepool({"--out", dir / "out", dir / "a.wav"}, dir).exit_code, 0);
  EXPECT_EQ(fs::last_write_time(dir / "out/a.wav.jsonl"), aged) << "complete result was redone";
  ASSERT_EQ(corepool({"--out", dir / "out", "--force", dir / "a.wav"}, dir).exit_code, 0);
  EXPECT_NE(fs::last_write_time(dir / "out/a.wav.jsonl"), aged) << "--force did not redo it";
}

TEST(BatchCliTest, AnIncompleteResultIsRedone) {
  testing::TempDir dir;
  synth::write_audio(dir / "a.wav", synth::demo_of_seconds(10));
  fs::create_directories(dir / "out");
  std::ofstream(dir / "out/a.wav.jsonl") << "{\"start\": 0, \"end\": 1, \"label\": \"x\", \"score\": 1}\n";
  ASSERT_EQ(corepool({"--out", dir / "out", dir / "a.wav"}, dir).exit_code, 0);
  EXPECT_TRUE(json_lines(testing::read_file(dir / "out/a.wav.jsonl")).back().contains("summary"));
}

// Result paths come from file names and directory walks, so they are checked
// like any outside input: a file named through "../" or by an absolute path
// lands under --out by its name, and a symbolic link planted inside --out is
// refused with an error naming the input, with nothing written where it points.
TEST(BatchCliTest, ResultsStayInsideTheOutputDirectory) {
  testing::TempDir dir;
  fs::create_directories(dir / "in/sub");
  fs::create_directories(dir / "elsewhere");
  fs::create_directories(dir / "out");
  synth::write_audio(dir / "in/a.wav", synth::demo_of_seconds(2));
  synth::write_audio(dir / "in/sub/b.wav", synth::demo_of_seconds(2));
  synth::write_audio(dir / "c.wav", synth::demo_of_seconds(2));
  fs::create_directory_symlink(dir / "elsewhere", dir / "out/sub");
  auto r = corepool({"--out", dir / "out", dir / "in", dir / "in/../c.wav", dir / "in/a.wav"}, dir);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(dir / "in/sub/b.wav: result " + dir / "out/sub/b.wav.jsonl refused: " +
                               dir / "out/sub is a symbolic link"));
  EXPECT_THAT(r.err, HasSubstr("another input already writes the result 'a.wav'")) << "the absolute a.wav";
  EXPECT_TRUE(fs::is_empty(dir / "elsewhere")) << "a result escaped through the link";
  EXPECT_TRUE(fs::exists(dir / "out/a.wav.jsonl"));
  EXPECT_TRUE(fs::exists(dir / "out/c.wav.jsonl")) << "../ input not written under --out";
  EXPECT_FALSE(fs::exists(dir / "c.wav.jsonl"));
}

TEST(BatchCliTest, EveryDamagedFileGetsOneErrorLineNamingIt) {
  testing::TempDir dir;
  fs::create_directories(dir / "bad");
  std::vector<std::string> damaged = synth::write_damaged_files(dir / "bad");
  std::vector<std::string> args = {"--out", dir / "out"};
  args.insert(args.end(), damaged.begin(), damaged.end());
  auto r = corepool(args, dir);
  EXPECT_EQ(r.exit_code, 1);
  auto errors = testing::lines_of(r.err);
  EXPECT_EQ(errors.size(), damaged.size()) << r.err;
  for (const auto& path : damaged) EXPECT_THAT(r.err, HasSubstr(path + ": "));
  EXPECT_FALSE(fs::exists(dir / "out") && !fs::is_empty(dir / "out")) << "partial output left";
}

TEST(BatchCliTest, PeakMemoryDoesNotGrowWithFileLength) {
  testing::TempDir dir;
  synth::write_audio(dir / "short.wav", synth::demo_of_seconds(120));
  synth::write_audio(dir / "long.wav", synth::demo_of_seconds(1800));
  // Memory that grows with length would be the pipeline's (decoded audio,
  // queued segments, results), not the model's: the small trained tagger
  // measures it as well as CNN10, in a tenth of the time.
  auto s = corepool({"--model", COREPOOL_DEFAULT_MODEL, "--out", dir / "out", dir / "short.wav"}, dir);
  auto l = corepool({"--model", COREPOOL_DEFAULT_MODEL, "--out", dir / "out", dir / "long.wav"}, dir);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  ASSERT_EQ(l.exit_code, 0) << l.err;
  // 15x the audio; anything proportional to length would add 100+ MB here.
  // The bound leaves room for what a loaded machine adds to a longer run
  // (16.7 MB seen under ctest -j2 next to the sanitizer builds).
  EXPECT_LT(l.max_rss_kb - s.max_rss_kb, 32 * 1024)
      << "peak RSS " << s.max_rss_kb / 1024 << " MB for 2 min, " << l.max_rss_kb / 1024 << " MB for 30 min";
}

TEST(BatchCliTest, MissingInputsAndBadModelsAndConfigsHaveTheirExitCodes) {
  testing::TempDir dir;
  auto missing = corepool({"--out", dir / "out", dir / "nope.wav"}, dir);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr(dir / "nope.wav"));

  synth::write_audio(dir / "a.wav", synth::demo_of_seconds(5));
  auto bad_model = corepool({"--model", dir / "no-model", dir / "a.wav"}, dir);
  EXPECT_EQ(bad_model.exit_code, 3);
  EXPECT_THAT(bad_model.err, HasSubstr(dir / "no-model"));

  std::ofstream(dir / "bad.toml") << "[engine]\nworkers = \"many\"\n";
  auto bad_config = testing::run_process({COREPOOL_BIN, "--config", dir / "bad.toml", "batch", "--model",
                                          COREPOOL_DEFAULT_MODEL, dir / "a.wav"},
                                         dir.path());
  EXPECT_EQ(bad_config.exit_code, 2);
  EXPECT_THAT(bad_config.err, HasSubstr("bad.toml:2"));
  EXPECT_THAT(bad_config.err, HasSubstr("engine.workers"));
}

}  // namespace
}  // namespace corepool
