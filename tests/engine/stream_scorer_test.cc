// StreamScorer (supervisor/batch/stream_scorer.h) without an engine: a held
// executor keeps what the scorer submits, and the test answers the tasks as an
// engine's calls would (batch and position in each result's timing). A call's
// lanes go out again together once its last result is in; a part of a call
// waits for the rest (or kStraggler). Silero's own scores: silero_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "supervisor/batch/stream_scorer.h"

namespace corepool {
namespace {

// Keeps every group the scorer submits; runs nothing.
class HeldExecutor final : public Executor {
 public:
  void submit(SegmentTask task) override {
    std::lock_guard<std::mutex> lock(mu_);
    groups_.push_back({});
    groups_.back().push_back(std::move(task));
  }
  bool try_submit(std::vector<SegmentTask>& tasks) override {
    std::lock_guard<std::mutex> lock(mu_);
    groups_.push_back(std::move(tasks));
    tasks.clear();
    return true;
  }
  void wait_idle() override {}
  void cancel(uint64_t) override {}
  int workers() const override { return 2; }
  ExecutorStats stats() const override { return {}; }
  std::vector<SegmentTask> take_group() {
    std::lock_guard<std::mutex> lock(mu_);
    if (groups_.empty()) return {};
    std::vector<SegmentTask> g = std::move(groups_.front());
    groups_.erase(groups_.begin());
    return g;
  }

 private:
  std::mutex mu_;
  std::vector<std::vector<SegmentTask>> groups_;
};

// One label, a state of 2 floats, chunks of 4 samples, no context, no lanes.
ModelConfig tiny_stateful() {
  ModelConfig c;
  c.kind = ModelKind::kStateful;
  c.labels = {"x"};
  c.thresholds = {0.5f};
  c.stateful.chunk_samples = 4;
  c.stateful.state_shape = {0, 2};
  return c;
}

// Task `t` answered as item `pos` of a call of `batch`.
SegmentResult answer(const SegmentTask& t, uint32_t batch, uint32_t pos) {
  SegmentResult r{t.stream, t.index, {0.5f, 1.0f, 2.0f}, "", {}};
  r.timing.batch = batch;
  r.timing.batch_pos = pos;
  return r;
}

class StreamScorerTest : public ::testing::Test {
 protected:
  // `streams` streams of two chunks each, submitted: the first group.
  std::vector<SegmentTask> start(int streams) {
    for (int i = 0; i < streams; ++i) scorer_.add(i, std::make_shared<const std::vector<float>>(8, 0.1f));
    EXPECT_TRUE(scorer_.pump(executor_, /*wait=*/false));
    return executor_.take_group();
  }

  ModelConfig config_ = tiny_stateful();
  HeldExecutor executor_;
  int done_ = 0;
  StreamScorer scorer_{config_, [this](uint64_t, std::vector<float>, const std::string& error) {
                         EXPECT_EQ(error, "");
                         ++done_;
                       }};
};

TEST_F(StreamScorerTest, ACallsLanesGoOutAgainAsOneGroupOnceItsLastResultIsIn) {
  const std::vector<SegmentTask> first = start(4);
  ASSERT_EQ(first.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) scorer_.on_complete(answer(first[i], 4, i));
  ASSERT_TRUE(scorer_.pump(executor_));
  const std::vector<SegmentTask> second = executor_.take_group();
  ASSERT_EQ(second.size(), 4u) << "the whole call's lanes, in one submission";
  for (const SegmentTask& t : second) EXPECT_EQ(t.index, 1u);
  for (uint32_t i = 0; i < 4; ++i) scorer_.on_complete(answer(second[i], 4, i));
  ASSERT_TRUE(scorer_.pump(executor_));  // ends the lanes, reports the streams
  EXPECT_EQ(done_, 4);
  EXPECT_FALSE(scorer_.pump(executor_)) << "no lane is live";
}

// Three of a call's four results are in: with two engines, half the lanes are
// ready, but the call is not over, so pump() waits for its last result, and
// sends those three without it only after kStraggler.
TEST_F(StreamScorerTest, APartOfACallWaitsForItsLastResultUntilTheStragglerBound) {
  const std::vector<SegmentTask> first = start(4);
  ASSERT_EQ(first.size(), 4u);
  for (uint32_t i = 0; i < 3; ++i) scorer_.on_complete(answer(first[i], 4, i));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(scorer_.pump(executor_));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, StreamScorer::kStraggler);
  EXPECT_EQ(executor_.take_group().size(), 3u);
}

}  // namespace
}  // namespace corepool
