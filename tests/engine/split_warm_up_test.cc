// Engine::warm_up() of a split stateful model ([stateful.split]): it runs the
// paths the model serves through, the front on a full batch and a sequence,
// and checks the method on one chunk. The model is made here, in TorchScript:
// a one-float state (h = h / 2 + the chunk's mean, score sigmoid(h)) whose
// front raises on more chunks than a limit, so the batch sizes an engine
// tries show in what fails, independently of the engine's own accounting.
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include "tests/support/temp_dir.h"
#include "worker/engine.h"
#include "worker/model/model.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;

constexpr int kLimit = 16;  // above check_split()'s 12 chunks

// `method_limit` bounds the method (forward) as `kLimit` bounds the front.
std::string limited_split_model(const testing::TempDir& dir, int method_limit = 1000) {
  std::ofstream(dir / "model.toml") << R"([model]
name = "limited-split"
kind = "stateful"
input = "waveform"
sample_rate = 16000
max_batch = 64
[stateful]
chunk_samples = 8
context_samples = 2
state_shape = [2, 0, 1]
[stateful.split]
front = "front"
sequence = "sequence"
feature_floats = 1
sequence_chunks = 4
[labels]
names = ["speech"]
)";
  torch::jit::Module m("LimitedSplit");
  m.register_attribute("limit", c10::IntType::get(), kLimit);
  m.register_attribute("method_limit", c10::IntType::get(), method_limit);
  m.define(R"(
def forward(self, x, state):
    assert x.size(0) <= self.method_limit, 'the method ran on more chunks than its limit'
    h = 0.5 * state[0] + x.mean(1, keepdim=True)
    return torch.sigmoid(h), torch.stack([h, state[1]])

def front(self, x):
    assert x.size(0) <= self.limit, 'more chunks than the limit'
    return x.mean(1, keepdim=True)

def sequence(self, features, state):
    h = state[0]
    scores = []
    for t in range(features.size(0)):
        h = 0.5 * h + features[t]
        scores.append(torch.sigmoid(h))
    return torch.stack(scores), torch.stack([h, state[1]])
)");
  m.save(dir / "model.pt");
  return dir.path();
}

TEST(SplitWarmUpTest, TheFrontWarmsOnAFullBatchAndFailsThereWithTheModelNamed) {
  testing::TempDir dir;
  Engine engine(load_model(limited_split_model(dir)));
  EXPECT_NO_THROW(engine.warm_up(kLimit));
  try {
    engine.warm_up(kLimit + 1);
    FAIL() << "a front that fails on " << kLimit + 1 << " chunks warmed up at that batch";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.toml: [stateful.split] front on a batch of 17 silent chunks fails"));
    EXPECT_THAT(e.what(), HasSubstr("more chunks than the limit"));
  }
}

// The method at full batch is not what a split model serves through: its
// warm-up no longer runs it there (a method limited as the front is here
// would have failed at 16 before).
TEST(SplitWarmUpTest, TheMethodIsCheckedOnOneChunkNotOnAFullBatch) {
  testing::TempDir dir;
  Engine engine(load_model(limited_split_model(dir, /*method_limit=*/2)));  // check_split() runs it on two streams
  EXPECT_NO_THROW(engine.warm_up(kLimit));
}

}  // namespace
}  // namespace corepool
