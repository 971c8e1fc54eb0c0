// The stateful model kind in model.toml (config/model_config.cc): the Silero
// contract loads field for field, to_toml() round-trips it, sizes of a task
// and a result carry the state, and each mistake names file, line and key.
#include "config/model_config.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace corepool {
namespace {

const std::string kStateful = R"([model]
name = "vad"
kind = "stateful"
input = "waveform"
sample_rate = 16000
max_batch = 256
[stateful]
method = "_model"
chunk_samples = 512
context_samples = 64
state_shape = [2, 0, 128]
lane_seconds = 30.0
lane_warmup_seconds = 2.0
[events]
min_speech_ms = 200
[labels]
names = ["speech"]
)";

std::string with_line(const std::string& text, int line, const std::string& replacement) {
  std::istringstream in(text);
  std::string out;
  int number = 0;
  for (std::string current; std::getline(in, current);) out += (++number == line ? replacement : current) + "\n";
  return out;
}

class StatefulModelConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    std::ofstream(path()) << text;
    return path();
  }
  std::string error_for(const std::string& text) {
    try {
      load_model_config(write(text));
    } catch (const ConfigError& error) {
      return error.what();
    }
    return "";
  }
  std::string path() const { return temp_.path() + "/model.toml"; }
  testing::TempDir temp_{"corepool-stateful"};
};

TEST_F(StatefulModelConfigTest, SileroContractLoadsEveryField) {
  const ModelConfig c = load_model_config(write(kStateful));
  EXPECT_TRUE(c.is_stateful());
  EXPECT_EQ(c.stateful.method, "_model");
  EXPECT_EQ(c.stateful.chunk_samples, 512);
  EXPECT_EQ(c.stateful.context_samples, 64);
  EXPECT_EQ(c.stateful.state_shape, (std::vector<int64_t>{2, 0, 128}));
  EXPECT_EQ(c.stateful.batch_dim(), 1);
  EXPECT_EQ(c.stateful.state_floats(), 256);
  EXPECT_EQ(c.stateful.lane_seconds, 30.0);
  EXPECT_EQ(c.stateful.lane_warmup_seconds, 2.0);
  EXPECT_EQ(c.rules.min_speech_ms, 200);
  EXPECT_EQ(c.rules.min_silence_ms, 100);  // Silero's defaults where the file is silent
  EXPECT_EQ(c.rules.speech_pad_ms, 30);
  EXPECT_DOUBLE_EQ(c.rules.hysteresis, 0.15);
  EXPECT_EQ(c.segment_samples(), 512);  // the chunk is the segment
  EXPECT_EQ(c.hop_samples(), 512);
  EXPECT_EQ(c.task_floats(), 64 + 512 + 256);
  EXPECT_EQ(c.result_floats(), 1 + 256);
  EXPECT_EQ(c.item_floats(), c.task_floats());
}

TEST_F(StatefulModelConfigTest, StatelessModelsKeepTheirSizes) {
  ModelConfig c;
  c.labels = {"a", "b"};
  EXPECT_FALSE(c.is_stateful());
  EXPECT_EQ(c.task_floats(), c.segment_samples());
  EXPECT_EQ(c.result_floats(), 2);
}

TEST_F(StatefulModelConfigTest, ToTomlOutputLoadsBackToTheSameConfig) {
  const ModelConfig c = load_model_config(write(kStateful));
  const ModelConfig back = load_model_config(write(to_toml(c)));
  EXPECT_TRUE(back.is_stateful());
  EXPECT_EQ(back.stateful.method, c.stateful.method);
  EXPECT_EQ(back.stateful.state_shape, c.stateful.state_shape);
  EXPECT_EQ(back.stateful.context_samples, c.stateful.context_samples);
  EXPECT_EQ(back.stateful.lane_seconds, c.stateful.lane_seconds);
  EXPECT_EQ(back.rules.min_speech_ms, c.rules.min_speech_ms);
  EXPECT_EQ(back.segment_seconds, c.segment_seconds);
  EXPECT_EQ(back.labels, c.labels);
}

TEST_F(StatefulModelConfigTest, EachMistakeNamesLineAndKey) {
  const std::string p = path();
  EXPECT_EQ(error_for(with_line(kStateful, 11, "state_shape = [2, 1, 128]")),
            p + ":11: stateful.state_shape: must hold exactly one 0, marking the batch dimension");
  EXPECT_EQ(error_for(with_line(kStateful, 11, "state_shape = [2, \"B\", 128]")),
            p + ":11: stateful.state_shape[1]: expected an integer, got a string");
  EXPECT_EQ(error_for(with_line(kStateful, 13, "lane_warmup_seconds = 30.0")),
            p + ":13: stateful.lane_warmup_seconds: must be shorter than lane_seconds");
  EXPECT_EQ(error_for(with_line(kStateful, 4, "segment_seconds = 1.0")).rfind(p + ":4: model.segment_seconds: ", 0), 0u);
  EXPECT_EQ(error_for(with_line(kStateful, 9, "")), p + ":7: stateful.chunk_samples: required key is missing");
  EXPECT_EQ(error_for(with_line(kStateful, 3, "kind = \"stateless\"")).rfind(p + ":", 0), 0u);
  // Chunks do not overlap, so a quiet label could move nothing: refused.
  EXPECT_EQ(error_for(kStateful + "quiet = \"speech\"\n"),
            p + ":18: labels.quiet: only a stateless model has a quiet label");
}

const std::string kSplit = kStateful + R"([stateful.split]
front = "front"
sequence = "sequence"
feature_floats = 128
sequence_chunks = 32
source = '''
def front(self, x: Tensor) -> Tensor:
    return x[:, 0:128]  # "quoted" and \\ kept
'''
)";

TEST_F(StatefulModelConfigTest, ASplitLoadsAndRoundTrips) {
  EXPECT_FALSE(load_model_config(write(kStateful)).stateful.split.enabled());
  const ModelConfig c = load_model_config(write(kSplit));
  const SplitSpec& split = c.stateful.split;
  EXPECT_TRUE(split.enabled());
  EXPECT_EQ(split.front, "front");
  EXPECT_EQ(split.sequence, "sequence");
  EXPECT_EQ(split.feature_floats, 128);
  EXPECT_EQ(split.sequence_chunks, 32);
  // Process mode's slots hold the longest sequence (32 x 128 features + 256 of
  // state) and its result (32 scores + 256 of state), past the chunk task's 832.
  EXPECT_EQ(c.slot_task_floats(), 32 * 128 + 256);
  EXPECT_EQ(c.slot_result_floats(), 32 + 256);
  EXPECT_EQ(load_model_config(write(kStateful)).slot_task_floats(), 64 + 512 + 256);
  EXPECT_EQ(split.source,
            "def front(self, x: Tensor) -> Tensor:\n    return x[:, 0:128]  # \"quoted\" and \\\\ kept\n");
  const SplitSpec back = load_model_config(write(to_toml(c))).stateful.split;
  EXPECT_EQ(back.front, split.front);
  EXPECT_EQ(back.sequence, split.sequence);
  EXPECT_EQ(back.feature_floats, split.feature_floats);
  EXPECT_EQ(back.sequence_chunks, split.sequence_chunks);
  EXPECT_EQ(back.source, split.source);
}

TEST_F(StatefulModelConfigTest, ASplitsMistakesNameLineAndKey) {
  const std::string p = path();
  EXPECT_EQ(error_for(with_line(kSplit, 21, "")), p + ":18: stateful.split.feature_floats: required key is missing");
  EXPECT_EQ(error_for(with_line(kSplit, 20, "sequence = \"front\"")),
            p + ":20: stateful.split.sequence: must differ from front");
  const auto starts = [](const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; };
  EXPECT_TRUE(starts(error_for(with_line(kSplit, 22, "sequence_chunks = 0")), p + ":22: stateful.split.sequence_chunks"));
  EXPECT_TRUE(starts(error_for(with_line(kSplit, 21, "feature_floats = -1")), p + ":21: stateful.split.feature_floats"));
}

}  // namespace
}  // namespace corepool
