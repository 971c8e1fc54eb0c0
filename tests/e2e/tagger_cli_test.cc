// The trained default model (models/default) through the real binary: the
// spoken words Debian's alsa-utils installs, the `make run` demo, whose
// boundaries are known, its timeline format, and the trainer. The held-out
// accuracy is tested in-process in tests/engine/tagger_test.cc.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/script.h>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tools/audio_synth.h"
#include "tools/sound_classes.h"
#include "worker/engine.h"
#include "worker/model/model.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kAlsaSounds = "/usr/share/sounds/alsa";

// Runs `corepool batch --out -` on `files` and groups its JSON lines by file.
std::map<std::string, std::vector<json>> batch_lines(const std::vector<std::string>& files,
                                                     const testing::TempDir& dir) {
  std::vector<std::string> argv = {COREPOOL_BIN, "--log-level", "warn", "batch", "--model",
                                   COREPOOL_DEFAULT_MODEL, "--out", "-", "--no-progress"};
  argv.insert(argv.end(), files.begin(), files.end());
  const testing::ProcessResult r = testing::run_process(argv, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::vector<json>> by_file;
  for (const std::string& line : testing::lines_of(r.out)) {
    const json j = json::parse(line);
    by_file[fs::path(j["file"].get<std::string>()).filename().string()].push_back(j);
  }
  return by_file;
}

// Seconds of the file covered by events of `label` (events of one label never overlap).
double seconds_of(const std::vector<json>& lines, const std::string& label) {
  double total = 0;
  for (const json& j : lines) {
    if (j.contains("label") && j["label"] == label) total += j["end"].get<double>() - j["start"].get<double>();
  }
  return total;
}

double duration_of(const std::vector<json>& lines) {
  return lines.empty() || !lines.back().contains("summary") ? 0.0 : lines.back()["summary"]["duration"].get<double>();
}

TEST(TaggerTest, AlsaRecordingsOfSpokenWordsAreTaggedSpeechForMostOfTheirDuration) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(kAlsaSounds)) {
    if (e.path().extension() == ".wav") files.push_back(e.path());
  }
  ASSERT_GE(files.size(), 9u) << kAlsaSounds << " should hold alsa-utils' test sounds (apt-get install alsa-utils)";
  testing::TempDir dir;
  const auto by_file = batch_lines(files, dir);
  ASSERT_EQ(by_file.size(), files.size());
  for (const auto& [file, lines] : by_file) {
    // Every file is a spoken channel name ("Front Center"), except Noise.wav, which is noise.
    const std::string truth = file == "Noise.wav" ? "noise" : "speech";
    const double duration = duration_of(lines), tagged = seconds_of(lines, truth);
    std::printf("%-16s %.2f s, %s %.2f s\n", file.c_str(), duration, truth.c_str(), tagged);
    EXPECT_GT(tagged, 0.5 * duration) << file << " is " << truth;
  }
}

TEST(TaggerTest, TheDemoTimelineHasEachPartWithinOneSegmentOfItsTrueBoundaries) {
  testing::TempDir dir;
  const std::string wav = dir / "demo.wav";
  synth::write_samples(wav, synth::demo_samples(16000), 16000);
  const auto by_file = batch_lines({wav}, dir);
  ASSERT_EQ(by_file.count("demo.wav"), 1u);
  std::vector<json> events = by_file.at("demo.wav");
  events.pop_back();  // the summary
  const auto parts = synth::demo_parts();
  ASSERT_EQ(events.size(), parts.size()) << json(events).dump();
  const double segment = load_model(COREPOOL_DEFAULT_MODEL)->config.segment_seconds;
  for (size_t i = 0; i < parts.size(); ++i) {
    SCOPED_TRACE(events[i].dump());
    EXPECT_EQ(events[i]["label"], synth::label_name(parts[i].label));
    EXPECT_NEAR(events[i]["start"].get<double>(), parts[i].start, segment);
    EXPECT_NEAR(events[i]["end"].get<double>(), parts[i].end, segment);
  }
}

TEST(TaggerTest, TimelineFormatPrintsOneReadableLinePerEventAndNeedsStdout) {
  testing::TempDir dir;
  const std::string wav = dir / "demo.wav";
  synth::write_samples(wav, synth::demo_samples(16000), 16000);
  const auto r = testing::run_process({COREPOOL_BIN, "--log-level", "warn", "batch", "--model", COREPOOL_DEFAULT_MODEL,
                                       "--format", "timeline", "--out", "-", "--no-progress", wav},
                                      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = testing::lines_of(r.out);
  ASSERT_EQ(lines.size(), synth::demo_parts().size() + 1) << r.out;
  EXPECT_NE(lines[0].find("   0.0 - "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(" speech "), std::string::npos) << lines[0];
  EXPECT_NE(lines.back().find("28.0 s of audio"), std::string::npos) << lines.back();

  const auto bad = testing::run_process({COREPOOL_BIN, "batch", "--model", COREPOOL_DEFAULT_MODEL, "--format",
                                         "timeline", "--out", dir / "out", wav},
                                        dir.path());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--format timeline"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
}

TEST(TaggerTest, TheTrainerWritesALoadableModelAndRefusesAnotherContract) {
  testing::TempDir dir;
  fs::create_directories(dir / "m");
  fs::copy_file(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml", dir / "m/model.toml");
  const auto r = testing::run_process({COREPOOL_TRAIN_TAGGER_BIN, "--out", dir / "m", "--per-class", "12",
                                       "--held-out-per-class", "4", "--epochs", "1"},
                                      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("held-out accuracy"), std::string::npos) << r.out;
  const auto model = load_model(dir / "m");
  Engine engine(model);
  EXPECT_NO_THROW(engine.check_output_shape());  // one forward(): [1, 4] scores

  std::string toml = testing::read_file(dir / "m/model.toml");
  toml.replace(toml.find("\"music\""), 7, "\"songs\"");
  std::ofstream(dir / "m/model.toml") << toml;
  const auto bad = testing::run_process({COREPOOL_TRAIN_TAGGER_BIN, "--out", dir / "m", "--epochs", "1"}, dir.path());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("model.toml: labels must be"), std::string::npos) << bad.err;
}

// FNV-1a over the path's bytes: real_clips.cc's stable_hash, written again
// here to pick files that land in the trainer's validation (hash % 10 == 0).
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The same recordings unpacked in two directories of different depth train
// the same model, byte for byte: the trainer's draws must not depend on where
// `make train` unpacked the packages (they did: seeded from the full path).
TEST(TaggerTest, TheTrainerGivesTheSameModelWhereverTheRecordingsAreUnpacked) {
  testing::TempDir dir;
  const std::vector<std::string> dests = {dir / "a", dir / "b/unpacked/elsewhere"};
  std::string manifest;
  synth::Rng rng(5);
  for (const synth::Label label : {synth::Label::kSpeech, synth::Label::kMusic, synth::Label::kNoise,
                                   synth::Label::kSilence}) {
    int train = 0, validation = 0;
    for (int i = 0; train < 2 || validation < 1; ++i) {
      const std::string path = std::string("pkgs/p/") + synth::label_name(label) + std::to_string(i) + ".wav";
      const bool is_validation = fnv1a(path) % 10 == 0;
      if (is_validation ? validation >= 1 : train >= 2) continue;
      (is_validation ? validation : train) += 1;
      const std::vector<float> samples = synth::generate(label, rng, synth::Split::kTrain, 2.0, 16000);
      for (const std::string& dest : dests) {
        fs::create_directories(dest + "/pkgs/p");
        synth::write_samples(dest + "/" + path, samples, 16000);
      }
      manifest += path + "\t" + synth::label_name(label) + "\ttrain\tp\n";
    }
  }
  std::vector<std::string> models;
  for (const std::string& dest : dests) {
    std::ofstream(dest + "/manifest.tsv") << manifest;
    const std::string out = dest + "/m";
    fs::create_directories(out);
    fs::copy_file(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml", out + "/model.toml");
    const auto r = testing::run_process({COREPOOL_TRAIN_TAGGER_BIN, "--out", out, "--per-class", "12",
                                         "--held-out-per-class", "4", "--epochs", "1", "--real", dest,
                                         "--real-per-class", "8"},
                                        dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    models.push_back(testing::read_file(out + "/model.pt"));
  }
  EXPECT_FALSE(models[0].empty());
  EXPECT_TRUE(models[0] == models[1]) << "the two directories trained different models";
}

// Two tiny networks trained with seeds 1 and 2 and their average (--members):
// the saved ensemble must give the mean of the members' own outputs, computed
// here by running each member file alone, and must refuse members that are
// not the same network.
TEST(TaggerTest, TheTrainerAveragesTrainedNetworksIntoOneModelAndRefusesMismatchedOnes) {
  testing::TempDir dir;
  const auto train = [&](const std::string& name, const std::string& seed, const std::string& channels) {
    fs::create_directories(dir / name);
    fs::copy_file(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml", dir / (name + "/model.toml"));
    const auto r = testing::run_process({COREPOOL_TRAIN_TAGGER_BIN, "--out", dir / name, "--per-class", "12",
                                         "--held-out-per-class", "4", "--epochs", "1", "--seed", seed,
                                         "--channels", channels},
                                        dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  };
  train("a", "1", "4,8");
  train("b", "2", "4,8");
  train("c", "3", "4,6");
  fs::create_directories(dir / "ens");
  fs::copy_file(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml", dir / "ens/model.toml");
  const std::string a = dir / "a/model.pt", b = dir / "b/model.pt";
  const auto r = testing::run_process({COREPOOL_TRAIN_TAGGER_BIN, "--out", dir / "ens", "--members", a + "," + b},
                                      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;

  torch::jit::Module ma = torch::jit::load(a), mb = torch::jit::load(b), me = torch::jit::load(dir / "ens/model.pt");
  torch::manual_seed(7);
  const torch::Tensor x = torch::randn({3, 1, 64, 101}) * 4 - 6;  // log-mel-like values
  const torch::Tensor want = (ma.forward({x}).toTensor() + mb.forward({x}).toTensor()) / 2;
  const torch::Tensor got = me.forward({x}).toTensor();
  EXPECT_LT((got - want).abs().max().item<float>(), 1e-6);
  EXPECT_GT((ma.forward({x}).toTensor() - mb.forward({x}).toTensor()).abs().max().item<float>(), 1e-3)
      << "two seeds gave the same network: the average tests nothing";
  // The engine runs it as it runs any tagger: one forward() of [1, 4] scores.
  Engine engine(load_model(dir / "ens"));
  EXPECT_NO_THROW(engine.check_output_shape());

  const auto bad = testing::run_process(
      {COREPOOL_TRAIN_TAGGER_BIN, "--out", dir / "ens", "--members", a + "," + dir / "c/model.pt"},
      dir.path());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("ensemble member 1: c2_w differs in shape from member 0's"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace corepool
