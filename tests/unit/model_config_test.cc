// Unit tests for load_model_config() and to_toml() (config/model_config.cc): a valid
// model.toml loads field for field, to_toml() output loads back to the same value,
// and each validation error names file, line and key. Each test owns a temp dir.
#include "config/model_config.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <optional>
#include <string>

namespace corepool {
namespace {

namespace fs = std::filesystem;

// The example from the contract; tests swap single lines so line numbers stay put.
const std::string kValid = R"([model]
name = "default"
input = "logmel"        # logmel | waveform
sample_rate = 16000
segment_seconds = 1.0
hop_seconds = 0.5
max_batch = 64
[features]
n_fft = 512
hop_length = 160
n_mels = 64
fmin = 0.0
fmax = 8000.0
[labels]
names = ["speech", "music", "noise", "silence"]
threshold = 0.5
[labels.thresholds]   # optional, per label
speech = 0.6
)";

// `text` with its line `line` (1-based) replaced by `replacement`.
std::string with_line(const std::string& text, int line, const std::string& replacement) {
  std::istringstream in(text);
  std::string out;
  int number = 0;
  for (std::string current; std::getline(in, current);) {
    out += (++number == line ? replacement : current) + "\n";
  }
  return out;
}

class ModelConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    std::ofstream(path()) << text;
    return path();
  }

  // The ConfigError message for `text`, or "" when it loads.
  std::string error_for(const std::string& text) {
    try {
      load_model_config(write(text));
    } catch (const ConfigError& error) {
      return error.what();
    }
    return "";
  }

  // The expected message for an error at `line` (0 = no line) on `key`.
  std::string at(int line, const std::string& key, const std::string& reason) const {
    return path() + (line ? ":" + std::to_string(line) : "") + ": " + key + ": " + reason;
  }

  std::string path() const { return (dir_ / "model.toml").string(); }

  testing::TempDir temp_{"corepool-model"};
  const fs::path dir_ = temp_.path();
};

void expect_same(const ModelConfig& actual, const ModelConfig& expected) {
  EXPECT_EQ(actual.name, expected.name);
  EXPECT_EQ(actual.input, expected.input);
  EXPECT_EQ(actual.sample_rate, expected.sample_rate);
  EXPECT_EQ(actual.segment_seconds, expected.segment_seconds);
  EXPECT_EQ(actual.hop_seconds, expected.hop_seconds);
  EXPECT_EQ(actual.n_fft, expected.n_fft);
  EXPECT_EQ(actual.hop_length, expected.hop_length);
  EXPECT_EQ(actual.n_mels, expected.n_mels);
  EXPECT_EQ(actual.fmin, expected.fmin);
  EXPECT_EQ(actual.fmax, expected.fmax);
  EXPECT_EQ(actual.labels, expected.labels);
  EXPECT_EQ(actual.thresholds, expected.thresholds);
  EXPECT_EQ(actual.max_batch, expected.max_batch);
  EXPECT_EQ(actual.quiet_label, expected.quiet_label);
}

TEST_F(ModelConfigTest, ValidFileLoadsEveryField) {
  const ModelConfig config = load_model_config(write(kValid));
  EXPECT_EQ(config.name, "default");
  EXPECT_EQ(config.input, InputKind::kLogMel);
  EXPECT_EQ(config.sample_rate, 16000);
  EXPECT_EQ(config.segment_seconds, 1.0);
  EXPECT_EQ(config.hop_seconds, 0.5);
  EXPECT_EQ(config.max_batch, 64);
  EXPECT_EQ(config.n_fft, 512);
  EXPECT_EQ(config.hop_length, 160);
  EXPECT_EQ(config.n_mels, 64);
  EXPECT_EQ(config.fmin, 0.0);
  EXPECT_EQ(config.fmax, 8000.0);
  EXPECT_EQ(config.labels, (std::vector<std::string>{"speech", "music", "noise", "silence"}));
  EXPECT_EQ(config.thresholds, (std::vector<float>{0.6f, 0.5f, 0.5f, 0.5f}));
}

TEST_F(ModelConfigTest, ValuesDifferentFromTheDefaultsAreRead) {
  std::string text = with_line(kValid, 2, "name = \"vad-v2\"");
  text = with_line(text, 4, "sample_rate = 32000");
  text = with_line(text, 5, "segment_seconds = 2");  // an integer where a float is expected
  text = with_line(text, 7, "max_batch = 8");
  text = with_line(text, 9, "n_fft = 1024");
  text = with_line(text, 10, "hop_length = 320");
  text = with_line(text, 11, "n_mels = 128");
  text = with_line(text, 12, "fmin = 50");
  text = with_line(text, 13, "fmax = 0");
  text = with_line(text, 16, "threshold = 0.25");
  const ModelConfig config = load_model_config(write(text));
  EXPECT_EQ(config.name, "vad-v2");
  EXPECT_EQ(config.sample_rate, 32000);
  EXPECT_EQ(config.segment_seconds, 2.0);
  EXPECT_EQ(config.max_batch, 8);
  EXPECT_EQ(config.n_fft, 1024);
  EXPECT_EQ(config.hop_length, 320);
  EXPECT_EQ(config.n_mels, 128);
  EXPECT_EQ(config.fmin, 50.0);
  EXPECT_EQ(config.fmax, 0.0);
  EXPECT_EQ(config.thresholds, (std::vector<float>{0.6f, 0.25f, 0.25f, 0.25f}));
}

TEST_F(ModelConfigTest, WaveformModelNeedsNoFeaturesSection) {
  const ModelConfig config = load_model_config(write(R"([model]
name = "raw"
input = "waveform"
sample_rate = 8000
segment_seconds = 0.5
hop_seconds = 0.25
[labels]
names = ["a"]
)"));
  EXPECT_EQ(config.input, InputKind::kWaveform);
  EXPECT_EQ(config.segment_samples(), 4000);
  EXPECT_EQ(config.labels, std::vector<std::string>{"a"});
  EXPECT_EQ(config.thresholds, std::vector<float>{0.5f});
}

// Found by model_config_fuzz: a waveform model's [features] with a short
// n_fft and no hop_length loaded with the default hop (160) over n_fft, and
// to_toml() then wrote a file that did not load.
TEST_F(ModelConfigTest, AShortNfftWithTheDefaultHopIsRejectedNotWrittenBackBroken) {
  const std::string text = R"([model]
name = "raw"
input = "waveform"
sample_rate = 16000
[features]
n_fft = 64
[labels]
names = ["a"]
)";
  EXPECT_EQ(error_for(text), at(6, "features.n_fft", "is 64, less than the default hop_length 160: set features.hop_length too"));
  const ModelConfig config = load_model_config(write(with_line(text, 6, "n_fft = 64\nhop_length = 32")));
  EXPECT_EQ(config.hop_length, 32);
  EXPECT_EQ(to_toml(load_model_config(write(to_toml(config)))), to_toml(config));
}

TEST_F(ModelConfigTest, DerivedSampleCountsRoundToTheNearestSample) {
  ModelConfig config;
  config.sample_rate = 16000;
  config.segment_seconds = 2.0 / 3.0;  // 10666.67 samples
  config.hop_seconds = 1.0 / 3.0;      // 5333.33 samples
  config.hop_length = 160;
  EXPECT_EQ(config.segment_samples(), 10667);
  EXPECT_EQ(config.hop_samples(), 5333);
  EXPECT_EQ(config.frames_per_segment(), 1 + 10667 / 160);
  config.segment_seconds = 1.0;
  EXPECT_EQ(config.frames_per_segment(), 101);
}

// The shape a model-input request must have: one item of the feature step's
// output ([B, 1, n_mels, frames] or [B, samples]) without the batch dim.
TEST_F(ModelConfigTest, ItemShapeIsOneItemOfTheModelInput) {
  const ModelConfig logmel = load_model_config(write(kValid));
  EXPECT_EQ(logmel.item_shape(), (std::vector<int64_t>{1, 64, 101}));
  EXPECT_EQ(logmel.item_floats(), 64 * 101);
  ModelConfig waveform = logmel;
  waveform.input = InputKind::kWaveform;
  waveform.sample_rate = 8000;
  waveform.segment_seconds = 0.5;
  EXPECT_EQ(waveform.item_shape(), (std::vector<int64_t>{4000}));
  EXPECT_EQ(waveform.item_floats(), 4000);
}

TEST_F(ModelConfigTest, ToTomlOutputLoadsBackToTheSameConfig) {
  ModelConfig logmel = load_model_config(write(kValid));
  ModelConfig odd;
  odd.name = "quote \" back\\slash\ttab \xC3\xA9";
  odd.input = InputKind::kWaveform;
  odd.sample_rate = 44100;
  odd.segment_seconds = 0.1;
  odd.hop_seconds = 1.0 / 3.0;
  odd.n_fft = 2048;
  odd.hop_length = 441;
  odd.n_mels = 1;
  odd.fmin = 20.5;
  odd.fmax = 22050;
  odd.max_batch = 1;
  odd.labels = {"dog bark", "a.b", "x", "\"q\""};
  odd.thresholds = {0.1f, 1.0f / 3.0f, 0.0f, 1.0f};
  odd.quiet_label = "a.b";
  for (const ModelConfig& config : {logmel, odd}) {
    SCOPED_TRACE(to_toml(config));
    expect_same(load_model_config(write(to_toml(config))), config);
  }
}

TEST_F(ModelConfigTest, ToTomlKeepsEveryThresholdFloatExactly) {
  ModelConfig config;
  config.name = "many";
  std::mt19937 random(7);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int i = 0; i < 2000; ++i) {
    config.labels.push_back("label" + std::to_string(i));
    config.thresholds.push_back(i % 3 == 0 ? 0.5f : unit(random));
  }
  expect_same(load_model_config(write(to_toml(config))), config);
}

TEST_F(ModelConfigTest, ToTomlRejectsThresholdsThatDoNotMatchTheLabels) {
  ModelConfig config;
  config.labels = {"a", "b"};
  config.thresholds = {0.5f};
  EXPECT_THROW(to_toml(config), std::invalid_argument);
}

TEST_F(ModelConfigTest, ToTomlRejectsAQuietLabelThatIsNotALabel) {
  ModelConfig config;
  config.labels = {"a", "b"};
  config.thresholds = {0.5f, 0.5f};
  config.quiet_label = "silence";  // would write a file that does not load
  EXPECT_THROW(to_toml(config), std::invalid_argument);
  config.quiet_label = "b";
  EXPECT_NO_THROW(to_toml(config));
}

TEST_F(ModelConfigTest, EachOutOfRangeModelValueNamesLineAndKey) {
  EXPECT_EQ(error_for(with_line(kValid, 3, "input = \"mel\"")),
            at(3, "model.input", "must be one of \"logmel\", \"waveform\"; got \"mel\""));
  EXPECT_EQ(error_for(with_line(kValid, 4, "sample_rate = 500")),
            at(4, "model.sample_rate", "must be between 1000 and 192000, got 500"));
  EXPECT_EQ(error_for(with_line(kValid, 5, "segment_seconds = 0")),
            at(5, "model.segment_seconds", "must be greater than 0 and at most 60, got 0"));
  EXPECT_EQ(error_for(with_line(kValid, 6, "hop_seconds = 60.5")),
            at(6, "model.hop_seconds", "must be greater than 0 and at most 60, got 60.5"));
  EXPECT_EQ(error_for(with_line(kValid, 7, "max_batch = 0")),
            at(7, "model.max_batch", "must be between 1 and 1000000, got 0"));
  EXPECT_EQ(error_for(with_line(kValid, 2, "name = 3")),
            at(2, "model.name", "expected a string, got an integer"));
  EXPECT_EQ(error_for(with_line(kValid, 5, "segment_seconds = \"1\"")),
            at(5, "model.segment_seconds", "expected a number, got a string"));
}

TEST_F(ModelConfigTest, EachBadFeatureValueNamesLineAndKey) {
  EXPECT_EQ(error_for(with_line(kValid, 9, "n_fft = 500")),
            at(9, "features.n_fft", "must be a power of two, got 500"));
  EXPECT_EQ(error_for(with_line(kValid, 9, "n_fft = 8")),
            at(9, "features.n_fft", "must be between 16 and 8192, got 8"));
  EXPECT_EQ(error_for(with_line(kValid, 10, "hop_length = 513")),
            at(10, "features.hop_length", "must be between 1 and 512, got 513"));
  EXPECT_EQ(error_for(with_line(kValid, 11, "n_mels = 513")),
            at(11, "features.n_mels", "must be between 1 and 512, got 513"));
  EXPECT_EQ(error_for(with_line(kValid, 12, "fmin = -1")),
            at(12, "features.fmin", "must be at least 0, got -1"));
}

TEST_F(ModelConfigTest, FmaxAboveNyquistIsRejected) {
  EXPECT_EQ(error_for(with_line(kValid, 13, "fmax = 8000.5")),
            at(13, "features.fmax", "must be at most sample_rate / 2 = 8000, got 8000.5"));
}

TEST_F(ModelConfigTest, FminMustBeBelowFmax) {
  std::string text = with_line(kValid, 12, "fmin = 4000");
  EXPECT_EQ(error_for(with_line(text, 13, "fmax = 4000")),
            at(12, "features.fmin", "must be below fmax = 4000, got 4000"));
}

TEST_F(ModelConfigTest, ZeroFmaxMeansNyquistForTheFminCheck) {
  const std::string text = with_line(kValid, 13, "fmax = 0");
  EXPECT_EQ(error_for(with_line(text, 12, "fmin = 8000")),
            at(12, "features.fmin", "must be below fmax = 8000, got 8000"));
  EXPECT_EQ(error_for(with_line(text, 12, "fmin = 7999")), "");
}

TEST_F(ModelConfigTest, LogMelSegmentShorterThanOneFftIsRejected) {
  EXPECT_EQ(error_for(with_line(kValid, 5, "segment_seconds = 0.01")),
            at(5, "model.segment_seconds",
               "gives 160 samples at 16000 Hz, needs at least features.n_fft = 512"));
}

TEST_F(ModelConfigTest, HopThatRoundsToZeroSamplesIsRejected) {
  EXPECT_EQ(error_for(with_line(kValid, 6, "hop_seconds = 0.00001")),
            at(6, "model.hop_seconds", "gives 0 samples at 16000 Hz, needs at least 1"));
}

TEST_F(ModelConfigTest, LogMelWithoutFeaturesSectionIsRejected) {
  std::string text = kValid;
  for (int line = 8; line <= 13; ++line) text = with_line(text, line, "");
  EXPECT_EQ(error_for(text), at(0, "features", "section is required for input = \"logmel\""));
}

TEST_F(ModelConfigTest, LogMelFeatureShapeKeysAreRequired) {
  EXPECT_EQ(error_for(with_line(kValid, 11, "")),
            at(8, "features.n_mels", "required key is missing"));
}

TEST_F(ModelConfigTest, MissingLabelNamesAreRejected) {
  EXPECT_EQ(error_for(with_line(kValid, 15, "")),
            at(14, "labels.names", "required key is missing"));
  std::string no_labels = kValid;
  for (int line = 14; line <= 18; ++line) no_labels = with_line(no_labels, line, "");
  EXPECT_EQ(error_for(no_labels), at(0, "labels.names", "required key is missing"));
}

TEST_F(ModelConfigTest, BadLabelNamesAreRejected) {
  EXPECT_EQ(error_for(with_line(kValid, 15, "names = []")),
            at(15, "labels.names", "must name at least one label"));
  EXPECT_EQ(error_for(with_line(kValid, 15, "names = [\"speech\", \"\"]")),
            at(15, "labels.names", "label 1 is empty"));
  EXPECT_EQ(error_for(with_line(kValid, 15, "names = [\"speech\", \"music\", \"speech\"]")),
            at(15, "labels.names", "duplicate label \"speech\""));
  EXPECT_EQ(error_for(with_line(kValid, 15, "names = [\"speech\", 7]")),
            at(15, "labels.names[1]", "expected a string, got an integer"));
  EXPECT_EQ(error_for(with_line(kValid, 15, "names = \"speech\"")),
            at(15, "labels.names", "expected an array of strings, got a string"));
}

TEST_F(ModelConfigTest, ThresholdOutsideZeroToOneIsRejected) {
  EXPECT_EQ(error_for(with_line(kValid, 16, "threshold = 1.5")),
            at(16, "labels.threshold", "must be between 0 and 1, got 1.5"));
  EXPECT_EQ(error_for(with_line(kValid, 18, "speech = -0.1")),
            at(18, "labels.thresholds.speech", "must be between 0 and 1, got -0.1"));
  EXPECT_EQ(error_for(with_line(kValid, 18, "speech = \"high\"")),
            at(18, "labels.thresholds.speech", "expected a number, got a string"));
}

TEST_F(ModelConfigTest, PerLabelThresholdForAnUnknownLabelIsRejected) {
  EXPECT_EQ(error_for(kValid + "speeh = 0.7\n"),
            at(19, "labels.thresholds.speeh", "not a label in labels.names"));
}

TEST_F(ModelConfigTest, TheQuietLabelIsOneOfTheLabels) {
  const std::string quiet = with_line(kValid, 16, "threshold = 0.5\nquiet = \"silence\"");
  const ModelConfig config = load_model_config(write(quiet));
  EXPECT_EQ(config.quiet_label, "silence");
  EXPECT_EQ(config.quiet_index(), std::optional<size_t>(3));
  EXPECT_EQ(load_model_config(write(kValid)).quiet_index(), std::nullopt);  // none unless named
  EXPECT_EQ(error_for(with_line(kValid, 16, "quiet = \"silense\"")),
            at(16, "labels.quiet", "\"silense\" is not a label in labels.names"));
}

TEST_F(ModelConfigTest, UnknownKeysAreRejectedWhereverTheyAre) {
  EXPECT_EQ(error_for(with_line(kValid, 12, "fminn = 0.0")),
            at(12, "features.fminn", "unknown key"));
  EXPECT_EQ(error_for(kValid + "[extra]\n"), at(19, "extra", "unknown key"));
}

}  // namespace
}  // namespace corepool
