// What `corepool serve` needs from the Executor seam, in thread and process
// mode alike (typed tests): model-input tasks score like the PCM they are the
// features of, wrong sizes fail alone, try_submit is all-or-none and never
// blocks, stats() counts work and never goes backwards. A process-mode case
// re-runs itself in a fresh copy of this binary (libuv's spawn_helper pattern):
// the pool forks, and the parent of a fork must not have run LibTorch ops or
// OpenMP regions, which other tests in this binary do.
#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <type_traits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "supervisor/pool/process_pool.h"
#include "tests/engine/segments.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"
#include "worker/engine.h"
#include "worker/thread_executor.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;

constexpr const char* kChildEnv = "COREPOOL_EXECUTOR_TEST_CHILD";

// In a forking test's own process: runs this very test in a fresh copy of the
// binary, checks that it passed there and returns true (the body must not run
// here). In the copy, or for a test that does not fork: false, run the body.
bool ran_in_child(bool forks) {
  if (!forks || std::getenv(kChildEnv) != nullptr) return false;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter = std::string(info->test_suite_name()) + "." + info->name();
  testing::TempDir dir;
  const auto r = testing::run_self_test(filter, dir.path(), std::chrono::seconds(240), {std::string(kChildEnv) + "=1"});
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
  return true;
}

std::vector<float> pcm_for(const ModelConfig& cfg, uint64_t index) {
  return testing::test_segment(cfg.segment_samples(), index);
}

// One item of the model's input: the features of `pcm`, flattened row-major.
std::vector<float> model_input_for(Engine& engine, const std::vector<float>& pcm) {
  const torch::Tensor features = engine.features({pcm.data()}).contiguous();
  std::vector<int64_t> shape = engine.model().config.item_shape();
  shape.insert(shape.begin(), 1);
  EXPECT_EQ(features.sizes().vec(), shape) << "item_shape() is not what the feature step produces";
  const float* p = features.data_ptr<float>();
  return std::vector<float>(p, p + features.numel());
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-5) << what << ", label " << k;
}

// Collects results, checks exactly-once delivery, and can hold completions:
// while held, no task completes, so the executor's queue space stays taken.
class Results {
 public:
  void add(SegmentResult&& r) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !held_; });
    if (!by_index_.emplace(r.index, std::move(r)).second) ++duplicates_;
  }
  void hold() { set_held(true); }
  void release() { set_held(false); }
  std::map<uint64_t, SegmentResult> take() {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(duplicates_, 0);
    return std::move(by_index_);
  }

 private:
  void set_held(bool held) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_ = held;
    }
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  std::map<uint64_t, SegmentResult> by_index_;
  int duplicates_ = 0;
};

struct Options {
  int workers = 1;
  int max_batch = 4;
  int depth = 0;           // 0 = the executor's default
  int batch_delay_us = 0;  // process mode: wait this long for a fuller batch
};

struct ThreadMode {
  static constexpr bool kForks = false;
  static std::unique_ptr<Executor> make(std::shared_ptr<const LoadedModel> model, const Options& o,
                                        Executor::Completion done) {
    return std::make_unique<ThreadExecutor>(model, ThreadExecutorOptions{o.workers, o.max_batch, o.depth, {}},
                                            std::move(done));
  }
  static std::vector<int> pids(Executor&) { return {}; }
};

struct ProcessMode {
  static constexpr bool kForks = true;
  static std::unique_ptr<Executor> make(std::shared_ptr<const LoadedModel> model, const Options& o,
                                        Executor::Completion done) {
    ProcessPoolOptions options{o.workers, o.max_batch, o.batch_delay_us, o.depth, {}, 10000, 120000, 2, "warn", false};
    return std::make_unique<ProcessPool>(model, options, std::move(done));
  }
  static std::vector<int> pids(Executor& e) { return static_cast<ProcessPool&>(e).worker_pids(); }
};

struct ModeNames {
  template <typename T>
  static std::string GetName(int) {
    return std::is_same_v<T, ThreadMode> ? "ThreadMode" : "ProcessMode";
  }
};

template <typename Mode>
class ExecutorExtensionsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    results_.release();  // a failed assertion may have left completions held
    executor_.reset();
  }

  Executor& start(const Options& options) {
    model_ = load_model(COREPOOL_DEFAULT_MODEL);
    executor_ = Mode::make(model_, options, [this](SegmentResult&& r) { results_.add(std::move(r)); });
    return *executor_;
  }

  SegmentTask pcm_task(uint64_t index) { return {1, index, pcm_for(model_->config, index)}; }
  SegmentTask input_task(uint64_t index, std::vector<float> floats) {
    return {1, index, std::move(floats), TaskInput::kModelInput};
  }

  static double total_busy(const ExecutorStats& s) {
    double total = 0;
    for (double b : s.busy_seconds) total += b;
    return total;
  }

  std::shared_ptr<const LoadedModel> model_;
  Results results_;  // declared before executor_: it outlives every completion
  std::unique_ptr<Executor> executor_;
};

using Modes = ::testing::Types<ThreadMode, ProcessMode>;
TYPED_TEST_SUITE(ExecutorExtensionsTest, Modes, ModeNames);

TYPED_TEST(ExecutorExtensionsTest, ModelInputTasksScoreLikeThePcmTheyAreTheFeaturesOf) {
  if (ran_in_child(TypeParam::kForks)) return;
  // One worker and a batching delay: consecutive tasks share a forward(), and
  // the kinds alternate, so every batch of two or more is a mixed batch.
  Executor& ex = this->start({1, 4, 0, 50000});
  Engine engine(this->model_);  // after the fork: features run in the parent
  std::vector<SegmentTask> tasks;
  for (uint64_t i = 0; i < 8; ++i) {
    tasks.push_back(this->pcm_task(i));
    tasks.push_back(this->input_task(100 + i, model_input_for(engine, tasks.back().samples)));
  }
  ASSERT_TRUE(ex.try_submit(tasks));
  ex.wait_idle();
  auto results = this->results_.take();
  ASSERT_EQ(results.size(), 16u);
  for (uint64_t i = 0; i < 8; ++i) {
    const SegmentResult& pcm = results.at(i);
    const SegmentResult& input = results.at(100 + i);
    ASSERT_TRUE(pcm.error.empty()) << pcm.error;
    ASSERT_TRUE(input.error.empty()) << input.error;
    ASSERT_EQ(pcm.scores.size(), this->model_->config.labels.size());
    expect_near(input.scores, pcm.scores, "segment " + std::to_string(i));
  }
  const ExecutorStats s = ex.stats();
  EXPECT_EQ(s.segments, 16u);
  EXPECT_LT(s.batches, s.segments) << "no batch held more than one task, so none was mixed";
}

// Triton's statistics read these: every result says how long it queued and
// what its batch cost, and the items of one forward() agree on the batch.
TYPED_TEST(ExecutorExtensionsTest, EveryResultSaysWhereItsTimeWent) {
  if (ran_in_child(TypeParam::kForks)) return;
  Executor& ex = this->start({1, 4, 0, 50000});
  std::vector<SegmentTask> tasks;
  for (uint64_t i = 0; i < 12; ++i) tasks.push_back(this->pcm_task(i));
  ASSERT_TRUE(ex.try_submit(tasks));
  ex.wait_idle();
  const auto results = this->results_.take();
  ASSERT_EQ(results.size(), 12u);
  uint64_t executions = 0, items = 0;
  for (const auto& [index, r] : results) {
    ASSERT_TRUE(r.error.empty()) << r.error;
    const SegmentTiming& t = r.timing;
    EXPECT_GE(t.batch, 1u) << index;
    EXPECT_LE(t.batch, 4u) << index;  // max_batch
    EXPECT_LT(t.batch_pos, t.batch) << index;
    EXPECT_GT(t.queue_ns, 0u) << index;
    EXPECT_GT(t.input_ns, 0u) << index;
    EXPECT_GT(t.infer_ns, 0u) << index;
    EXPECT_GT(t.output_ns, 0u) << index;
    if (t.batch_pos == 0) {
      ++executions;
      items += t.batch;
    }
  }
  const ExecutorStats s = ex.stats();
  EXPECT_EQ(executions, s.batches);  // one item per forward() stands for it
  EXPECT_EQ(items, 12u);
  // The last of 12 items on one worker waited behind the forward() calls before it.
  uint64_t first_infer = 0, max_queue = 0;
  for (const auto& [index, r] : results) {
    if (index == 0) first_infer = r.timing.infer_ns;
    max_queue = std::max(max_queue, r.timing.queue_ns);
  }
  EXPECT_GT(max_queue, first_infer);
}

// A stateful model's lanes go round as groups: the end of an engine call
// submits the call's tasks' next round from its completion. Those run on the
// engine that ran the call, as one batch, whatever the other engine does.
// Spread by load instead (process mode before), two calls ending at once
// swapped lanes between the workers and a call could take part of the
// other's group. 16 lanes, two engines, 20 rounds.
TYPED_TEST(ExecutorExtensionsTest, TasksACompletionSubmitsRunOnTheEngineThatRanItsCall) {
  if (ran_in_child(TypeParam::kForks)) return;
  constexpr uint64_t kLanes = 16, kRounds = 20;
  this->model_ = load_model(COREPOOL_DEFAULT_MODEL);
  std::mutex mu;
  std::map<uint64_t, SegmentTiming> ran;  // index (round * 100 + lane) -> where and in what batch
  std::atomic<bool> refused{false};
  Executor* ex = nullptr;
  thread_local std::vector<uint64_t> t_call;  // the lanes of the call being delivered on this thread
  auto done = [&](SegmentResult&& r) {
    EXPECT_TRUE(r.error.empty()) << r.error;
    {
      std::lock_guard<std::mutex> lock(mu);
      ran[r.index] = r.timing;
    }
    t_call.push_back(r.index);
    if (r.timing.batch_pos + 1 < r.timing.batch) return;
    std::vector<SegmentTask> next;
    for (const uint64_t index : t_call) {
      if (index / 100 + 1 < kRounds) next.push_back(this->pcm_task(index + 100));
    }
    t_call.clear();
    if (!next.empty() && !ex->try_submit(next)) refused = true;
  };
  std::unique_ptr<Executor> owned = TypeParam::make(this->model_, {2, 8, 0, 0}, done);
  ex = owned.get();
  ASSERT_TRUE(ex->submits_from_completions());
  std::vector<SegmentTask> first;
  for (uint64_t lane = 0; lane < kLanes; ++lane) first.push_back(this->pcm_task(lane));
  ASSERT_TRUE(ex->try_submit(first));
  ASSERT_TRUE(testing::wait_until([&] {
    std::lock_guard<std::mutex> lock(mu);
    return ran.size() == kLanes * kRounds;
  }, std::chrono::seconds(120)));
  ex->wait_idle();
  owned.reset();
  EXPECT_FALSE(refused) << "a completion's try_submit was refused";
  std::lock_guard<std::mutex> lock(mu);
  for (uint64_t lane = 0; lane < kLanes; ++lane) {
    const int engine = ran.at(lane).engine;
    ASSERT_GE(engine, 0) << "lane " << lane << ": no engine recorded";
    for (uint64_t round = 1; round < kRounds; ++round) {
      const SegmentTiming& t = ran.at(round * 100 + lane);
      EXPECT_EQ(t.engine, engine) << "lane " << lane << " moved to another engine in round " << round;
      EXPECT_EQ(t.batch, ran.at((round - 1) * 100 + lane).batch) << "lane " << lane << ", round " << round
                                                                  << ": its group came apart";
    }
  }
}

TYPED_TEST(ExecutorExtensionsTest, AWrongSizedTaskFailsAloneAndTheRestOfItsBatchSucceeds) {
  if (ran_in_child(TypeParam::kForks)) return;
  Executor& ex = this->start({1, 8, 0, 50000});
  Engine engine(this->model_);
  const ModelConfig& cfg = this->model_->config;
  const auto item = static_cast<size_t>(cfg.item_floats());
  // Bigger than a slab slot's input area: the process pool copies it short.
  const size_t huge = std::max<size_t>(item, cfg.segment_samples()) + 10;
  const std::vector<float> input = model_input_for(engine, pcm_for(cfg, 1));
  std::vector<SegmentTask> tasks;
  tasks.push_back(this->pcm_task(0));
  tasks.push_back(this->input_task(1, input));
  tasks.push_back(this->input_task(2, std::vector<float>(item - 1, 0.5f)));
  tasks.push_back(this->input_task(3, std::vector<float>(huge, 0.5f)));
  tasks.push_back({1, 4, std::vector<float>(item, 0.5f)});  // PCM of a model input's size
  tasks.push_back(this->input_task(5, input));
  ASSERT_TRUE(ex.try_submit(tasks));
  ex.wait_idle();
  auto results = this->results_.take();
  ASSERT_EQ(results.size(), 6u);
  for (uint64_t i : {0, 1, 5}) {
    EXPECT_TRUE(results[i].error.empty()) << i << ": " << results[i].error;
    EXPECT_EQ(results[i].scores.size(), cfg.labels.size()) << i;
  }
  expect_near(results[5].scores, results[1].scores, "the same model input twice");
  EXPECT_THAT(results[2].error, HasSubstr("model input has " + std::to_string(item - 1) + " floats"));
  EXPECT_THAT(results[3].error, HasSubstr("model input has " + std::to_string(huge) + " floats"));
  EXPECT_THAT(results[4].error, HasSubstr("segment has " + std::to_string(item) + " samples"));
  for (uint64_t i : {2, 3, 4}) EXPECT_TRUE(results[i].scores.empty()) << i;
}

TYPED_TEST(ExecutorExtensionsTest, TrySubmitIsAllOrNoneAtCapacityAndNeverBlocks) {
  if (ran_in_child(TypeParam::kForks)) return;
  Executor& ex = this->start({1, 1, 4, 0});
  auto batch = [&](uint64_t first, int n) {
    std::vector<SegmentTask> tasks;
    for (int k = 0; k < n; ++k) tasks.push_back(this->pcm_task(first + k));
    return tasks;
  };
  // Held completions keep all queue space taken: a try_submit that waited for
  // space would hang this thread, the only one that can release them.
  this->results_.hold();
  std::vector<SegmentTask> three = batch(0, 3), two = batch(3, 2), one = batch(5, 1), more = batch(6, 1);
  ASSERT_TRUE(ex.try_submit(three));
  EXPECT_TRUE(three.empty());
  EXPECT_FALSE(ex.try_submit(two)) << "3 + 2 tasks do not fit depth 4";
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].index, 3u);
  EXPECT_EQ(two[1].samples.size(), static_cast<size_t>(this->model_->config.segment_samples())) << "moved from";
  EXPECT_EQ(ex.stats().outstanding, 3u);
  ASSERT_TRUE(ex.try_submit(one));
  EXPECT_FALSE(ex.try_submit(more));
  EXPECT_EQ(more.size(), 1u);
  EXPECT_EQ(ex.stats().outstanding, 4u);
  EXPECT_EQ(ex.stats().depth, 4u);
  this->results_.release();
  ex.wait_idle();
  EXPECT_EQ(ex.stats().outstanding, 0u);
  EXPECT_TRUE(ex.try_submit(two));
  EXPECT_TRUE(ex.try_submit(more));
  std::vector<SegmentTask> too_many = batch(10, 5);
  ex.wait_idle();
  EXPECT_FALSE(ex.try_submit(too_many)) << "more tasks than the depth never fit";
  auto results = this->results_.take();
  ASSERT_EQ(results.size(), 7u);
  for (auto& [index, r] : results) EXPECT_TRUE(r.error.empty()) << index << ": " << r.error;
}

TYPED_TEST(ExecutorExtensionsTest, StatsCountTheWorkAndNeverGoBackwards) {
  if (ran_in_child(TypeParam::kForks)) return;
  Executor& ex = this->start({2, 2, 0, 0});
  const ExecutorStats fresh = ex.stats();
  EXPECT_EQ(fresh.depth, 16u);  // 4 * workers * max_batch
  EXPECT_EQ(fresh.outstanding, 0u);
  EXPECT_TRUE(fresh.all_ready);
  EXPECT_EQ(fresh.busy_seconds, std::vector<double>(2, 0.0));
  EXPECT_EQ(fresh.batches, 0u);
  EXPECT_EQ(fresh.segments, 0u);
  EXPECT_EQ(fresh.pids, TypeParam::pids(ex));
  EXPECT_EQ(fresh.pids.size(), TypeParam::kForks ? 2u : 0u);
  // A reader on another thread, like the HTTP loop, while the work runs.
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    ExecutorStats last = ex.stats();
    while (!stop) {
      const ExecutorStats now = ex.stats();
      for (size_t k = 0; k < now.busy_seconds.size(); ++k) EXPECT_GE(now.busy_seconds[k], last.busy_seconds[k]);
      EXPECT_GE(now.segments, last.segments);
      EXPECT_LE(now.outstanding, now.depth);
      last = now;
    }
  });
  std::vector<double> busy_before = fresh.busy_seconds;
  for (uint64_t round = 1; round <= 2; ++round) {
    for (uint64_t i = 0; i < 20; ++i) ex.submit(this->pcm_task(round * 100 + i));
    ex.wait_idle();
    const ExecutorStats s = ex.stats();
    EXPECT_EQ(s.segments, 20 * round);
    EXPECT_GE(s.batches, 10 * round);  // at most max_batch = 2 per forward()
    EXPECT_LE(s.batches, 20 * round);
    EXPECT_EQ(s.outstanding, 0u);
    ASSERT_EQ(s.busy_seconds.size(), 2u);
    EXPECT_GT(this->total_busy(s), std::accumulate(busy_before.begin(), busy_before.end(), 0.0));
    for (size_t k = 0; k < 2; ++k) EXPECT_GE(s.busy_seconds[k], busy_before[k]);
    busy_before = s.busy_seconds;
  }
  stop = true;
  reader.join();
  EXPECT_EQ(this->results_.take().size(), 40u);
}

// Process mode only: a SIGKILLed worker's channel is wiped for its
// replacement, but its slot's busy time must carry over (a Prometheus counter).
TEST(ProcessPoolStatsTest, BusySecondsOfASlotNeverDropWhenItsWorkerIsRespawned) {
  if (ran_in_child(true)) return;
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  Results results;
  ProcessPool pool(model, {1, 2, 0, 0, {}, 10000, 120000, 2, "warn", false},
                   [&](SegmentResult&& r) { results.add(std::move(r)); });
  for (uint64_t i = 0; i < 10; ++i) pool.submit({1, i, pcm_for(model->config, i)});
  pool.wait_idle();
  const ExecutorStats before = pool.stats();
  ASSERT_GT(before.busy_seconds.at(0), 0.0);
  EXPECT_EQ(before.pids, pool.worker_pids());
  const int victim = before.pids.at(0);
  ASSERT_GT(victim, 0);
  ::kill(victim, SIGKILL);
  double last = before.busy_seconds[0];
  // Read stats() all through the reap and respawn: it must never dip.
  const bool respawned = testing::wait_until([&] {
    const ExecutorStats s = pool.stats();
    EXPECT_GE(s.busy_seconds[0], last);
    last = s.busy_seconds[0];
    return s.pids[0] > 0 && s.pids[0] != victim && s.all_ready;
  }, std::chrono::seconds(60));
  ASSERT_TRUE(respawned) << "worker 0 was not replaced";
  const ExecutorStats after = pool.stats();
  EXPECT_GE(after.busy_seconds[0], before.busy_seconds[0]);
  EXPECT_EQ(after.segments, before.segments);
  EXPECT_GE(after.restarts, 1u);
  EXPECT_EQ(after.pids, pool.worker_pids());
  for (uint64_t i = 10; i < 20; ++i) pool.submit({1, i, pcm_for(model->config, i)});
  pool.wait_idle();
  const ExecutorStats more = pool.stats();
  EXPECT_GT(more.busy_seconds[0], after.busy_seconds[0]);
  EXPECT_EQ(more.segments, 20u);
  EXPECT_EQ(results.take().size(), 20u);
}

// Engine level, in this process: one forward() over a batch that mixes kinds
// gives each item the scores of its PCM run alone through the feature step.
// try_submit from several threads at once while the loop thread delivers:
// the inline dispatch (try_lock on the loop's mutex) and the fallback
// through the loop's wake-up both run, and every task is answered once.
TEST(ProcessPoolStatsTest, ConcurrentTrySubmitsAreEachAnsweredOnce) {
  if (ran_in_child(true)) return;
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  Results results;
  ProcessPool pool(model, {2, 4, 0, 8, {}, 10000, 120000, 2, "warn", false},
                   [&](SegmentResult&& r) { results.add(std::move(r)); });
  constexpr uint64_t kPerThread = 40;
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < kPerThread; ++i) {
        const uint64_t index = t * kPerThread + i;
        std::vector<SegmentTask> one{{1, index, pcm_for(model->config, index)}};
        // Full queue: wait for room as a client would retry after a 503.
        while (!pool.try_submit(one)) std::this_thread::yield();
      }
    });
  }
  for (auto& th : threads) th.join();
  pool.wait_idle();
  const auto all = results.take();  // fails on any index answered twice
  ASSERT_EQ(all.size(), 4 * kPerThread);
  for (const auto& [index, r] : all) EXPECT_TRUE(r.error.empty()) << index << ": " << r.error;
  EXPECT_EQ(pool.stats().outstanding, 0u);
}

TEST(EngineItemsTest, AMixedBatchScoresEachItemLikeItsPcm) {
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  Engine engine(model);
  std::vector<std::vector<float>> pcm, inputs;
  for (uint64_t i = 0; i < 4; ++i) {
    pcm.push_back(pcm_for(model->config, i));
    inputs.push_back(model_input_for(engine, pcm.back()));
  }
  const auto expected = engine.infer({pcm[0].data(), pcm[1].data(), pcm[2].data(), pcm[3].data()});
  const auto mixed = engine.infer_items({{inputs[0].data(), TaskInput::kModelInput},
                                         {pcm[1].data(), TaskInput::kPcm},
                                         {inputs[2].data(), TaskInput::kModelInput},
                                         {pcm[3].data(), TaskInput::kPcm}});
  const auto inputs_only = engine.infer_items({{inputs[0].data(), TaskInput::kModelInput},
                                               {inputs[1].data(), TaskInput::kModelInput},
                                               {inputs[2].data(), TaskInput::kModelInput},
                                               {inputs[3].data(), TaskInput::kModelInput}});
  ASSERT_EQ(mixed.size(), 4u);
  ASSERT_EQ(inputs_only.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    expect_near(mixed[i], expected[i], "mixed batch, item " + std::to_string(i));
    expect_near(inputs_only[i], expected[i], "model inputs only, item " + std::to_string(i));
  }
}

// cancel() (a request past its deadline): the stream's tasks that have not
// started complete at once with an error and free their queue space; the
// others finish; every task completes exactly once and other streams are
// untouched.
TYPED_TEST(ExecutorExtensionsTest, CancelCompletesTheStreamsUnstartedTasksOnceAndSparesOtherStreams) {
  if (ran_in_child(TypeParam::kForks)) return;
  Executor& ex = this->start({1, 1, 256, 0});
  std::vector<SegmentTask> tasks;
  for (uint64_t i = 0; i < 200; ++i) tasks.push_back({i < 150 ? 2u : 3u, i, pcm_for(this->model_->config, i)});
  // Nothing runs between try_submit and the cancel, however fast the model:
  // process mode stops its one worker (its ring takes 64 at most), thread mode
  // holds its engine thread in its first completion. Both go on once the
  // cancel is counted.
  const std::vector<int> pids = TypeParam::pids(ex);
  for (int pid : pids) ::kill(pid, SIGSTOP);
  if (pids.empty()) this->results_.hold();
  ASSERT_TRUE(ex.try_submit(tasks));
  std::thread waker([&] {
    testing::wait_until([&] { return ex.stats().cancelled > 0; }, std::chrono::seconds(60));
    this->results_.release();
    for (int pid : pids) ::kill(pid, SIGCONT);
  });
  ex.cancel(2);
  waker.join();
  ex.wait_idle();
  auto results = this->results_.take();
  ASSERT_EQ(results.size(), 200u);
  uint64_t cancelled = 0;
  for (const auto& [index, r] : results) {
    if (index >= 150) {
      EXPECT_TRUE(r.error.empty()) << index << ": " << r.error;  // stream 3 is not cancelled
      continue;
    }
    if (r.error.empty()) continue;  // had started: ran to the end
    EXPECT_THAT(r.error, HasSubstr("cancelled"));
    ++cancelled;
  }
  // One worker, one task per forward(): at most a ring's worth (64) had left the queue.
  EXPECT_GE(cancelled, 150u - 64u - 8u);
  const ExecutorStats s = ex.stats();
  EXPECT_EQ(s.cancelled, cancelled);
  EXPECT_EQ(s.segments, 200u - cancelled);
  EXPECT_EQ(s.outstanding, 0u);
}

}  // namespace
}  // namespace corepool
