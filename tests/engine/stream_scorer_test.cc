// StreamScorer (supervisor/batch/stream_scorer.h) without an engine: a held
// executor keeps what the scorer submits, and the test answers the tasks as an
// engine's calls would (batch and position in each result's timing). A call's
// lanes go out again together once its last result is in; a part of a call
// waits for the rest (or kStraggler). Silero's own scores: silero_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>
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

// The same, but its completions may submit (as thread mode's may): a call's
// last result then submits that call's lanes from the thread delivering it.
class InlineExecutor final : public Executor {
 public:
  void submit(SegmentTask task) override { held_.submit(std::move(task)); }
  bool try_submit(std::vector<SegmentTask>& tasks) override { return held_.try_submit(tasks); }
  void wait_idle() override {}
  void cancel(uint64_t) override {}
  int workers() const override { return 2; }
  ExecutorStats stats() const override { return {}; }
  bool submits_from_completions() const override { return true; }
  std::vector<SegmentTask> take_group() { return held_.take_group(); }

 private:
  HeldExecutor held_;
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

// Two engines' calls of two lanes each, their results delivered each on its
// engine's thread, at once: call A's first result is in (thread 1) when call
// B's two come (thread 2). The end of call B submits B's two lanes only; call
// A's go out when A's last result comes. Taking every ready lane at B's end
// took A's lane too, and the two calls came apart.
TEST_F(StreamScorerTest, WithAnExecutorThatSubmitsFromCompletionsACallsEndSubmitsOnlyItsOwnLanes) {
  InlineExecutor inline_executor;
  scorer_.attach(&inline_executor);
  for (int i = 0; i < 4; ++i) scorer_.add(i, std::make_shared<const std::vector<float>>(8, 0.1f));
  ASSERT_TRUE(scorer_.pump(inline_executor, /*wait=*/false));
  const std::vector<SegmentTask> first = inline_executor.take_group();
  ASSERT_EQ(first.size(), 4u);
  const std::vector<SegmentTask> call_a{first[0], first[1]}, call_b{first[2], first[3]};
  std::promise<void> a_started, b_done;
  std::vector<SegmentTask> b_next;
  std::thread engine_a([&] {
    scorer_.on_complete(answer(call_a[0], 2, 0));
    a_started.set_value();
    b_done.get_future().wait();
    scorer_.on_complete(answer(call_a[1], 2, 1));
  });
  std::thread engine_b([&] {
    a_started.get_future().wait();
    scorer_.on_complete(answer(call_b[0], 2, 0));
    scorer_.on_complete(answer(call_b[1], 2, 1));
    b_next = inline_executor.take_group();
    b_done.set_value();
  });
  engine_a.join();
  engine_b.join();
  const auto streams_of = [](const std::vector<SegmentTask>& tasks) {
    std::vector<uint64_t> ids;
    for (const SegmentTask& t : tasks) ids.push_back(t.stream);
    std::sort(ids.begin(), ids.end());
    return ids;
  };
  EXPECT_EQ(streams_of(b_next), streams_of(call_b)) << "call B's end did not submit B's lanes alone";
  const std::vector<SegmentTask> a_next = inline_executor.take_group();
  EXPECT_EQ(streams_of(a_next), streams_of(call_a));
  for (const SegmentTask& t : a_next) EXPECT_EQ(t.index, 1u) << "lane " << t.stream;
  for (const SegmentTask& t : b_next) EXPECT_EQ(t.index, 1u) << "lane " << t.stream;
  scorer_.attach(nullptr);
}

}  // namespace
}  // namespace corepool
