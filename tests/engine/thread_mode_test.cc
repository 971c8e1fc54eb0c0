// Thread mode: N engine threads give the same scores as one, share one copy of
// the weights, apply backpressure, and turn bad segments and bad models into
// errors instead of crashes.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <condition_variable>
#include <map>
#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include "supervisor/pool/allocator.h"
#include "tests/engine/segments.h"
#include "tests/engine/small_model.h"
#include "tests/support/jemalloc.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"
#include "worker/engine.h"
#include "worker/model/torch_module.h"
#include "worker/thread_executor.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;

std::vector<float> segment_for(const ModelConfig& cfg, uint64_t index) {
  return testing::test_segment(cfg.segment_samples(), index);
}

// Runs `count` segments through a ThreadExecutor and returns scores by index.
std::map<uint64_t, std::vector<float>> run_segments(std::shared_ptr<const LoadedModel> model, int threads,
                                                    int max_batch, uint64_t count) {
  std::mutex mu;
  std::map<uint64_t, std::vector<float>> scores;
  {
    ThreadExecutor ex(model, {threads, max_batch, 0, {}}, [&](SegmentResult&& r) {
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_TRUE(r.error.empty()) << r.error;
      EXPECT_TRUE(scores.emplace(r.index, std::move(r.scores)).second) << "index " << r.index << " twice";
    });
    for (uint64_t i = 0; i < count; ++i) ex.submit({0, i, segment_for(model->config, i)});
    ex.wait_idle();
  }
  return scores;
}

TEST(ThreadModeTest, FourThreadsGiveTheScoresOfOneThread) {
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  const auto one = run_segments(model, 1, 1, 120);
  const auto four = run_segments(model, 4, 3, 120);
  ASSERT_EQ(one.size(), 120u);
  ASSERT_EQ(four.size(), 120u);
  for (const auto& [index, s] : one) {
    const auto& t = four.at(index);
    ASSERT_EQ(s.size(), t.size());
    for (size_t k = 0; k < s.size(); ++k) EXPECT_NEAR(s[k], t[k], 1e-5) << "segment " << index;
  }
}

TEST(ThreadModeTest, EngineThreadsShareOneCopyOfTheWeights) {
  testing::TempDir dir;
  // ~53 MB of weights: a copy per thread would add that much per thread.
  auto gen = testing::run_process({COREPOOL_GEN_MODEL_BIN, "--out", dir.path(), "--width", "8", "--hidden", "200000"},
                                  dir.path());
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  auto model = load_model(dir.path());
  ASSERT_GT(model->weight_bytes, 50u << 20);
  run_segments(model, 1, 1, 4);  // first-touch of code pages and allocator arenas
  const long before = testing::current_rss_kb();
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  {
    ThreadExecutor ex(model, {4, 1, 0, {}}, [&](SegmentResult&& r) {
      EXPECT_TRUE(r.error.empty()) << r.error;
      std::lock_guard<std::mutex> lock(mu);
      ++done;
      cv.notify_all();
    });
    for (uint64_t i = 0; i < 16; ++i) ex.submit({0, i, segment_for(model->config, i)});
    ex.wait_idle();
    const long during = testing::current_rss_kb();
    const long growth_kb = during - before;
    // Four private copies would add 3-4x the weights; activations are a few MB.
    EXPECT_LT(growth_kb * 1024, static_cast<long>(model->weight_bytes) / 2)
        << "RSS grew by " << growth_kb / 1024 << " MB for 4 threads over "
        << model->weight_bytes / (1 << 20) << " MB of weights";
  }
  EXPECT_EQ(done, 16);
}

TEST(ThreadModeTest, SubmitBlocksWhenTheQueueIsFull) {
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> submitted{0};
  ThreadExecutor ex(model, {1, 1, 2, {}}, [&](SegmentResult&&) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return release; });  // hold the only engine thread
  });
  std::thread producer([&] {
    for (uint64_t i = 0; i < 5; ++i) {
      ex.submit({0, i, segment_for(model->config, i)});
      ++submitted;
      cv.notify_all();
    }
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return submitted >= 2; }));
    // Depth 2: the third submit must not return while nothing completes.
    EXPECT_FALSE(cv.wait_for(lock, std::chrono::milliseconds(300), [&] { return submitted > 2; }));
    release = true;
  }
  cv.notify_all();
  producer.join();
  ex.wait_idle();
  EXPECT_EQ(submitted, 5);
}

// The size of each call two engines made of one group of `n` segments queued
// at once: as soon as the executor is up, or (`settled`) once both engines
// wait for work.
std::vector<uint32_t> calls_of_a_group(std::shared_ptr<const LoadedModel> model, int max_batch, uint64_t n,
                                       bool settled) {
  std::mutex mu;
  std::vector<uint32_t> batches;
  ThreadExecutor ex(model, {2, max_batch, 0, {}}, [&](SegmentResult&& r) {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(r.error.empty()) << r.error;
    if (r.timing.batch_pos == 0) batches.push_back(r.timing.batch);
  });
  if (settled) {
    EXPECT_TRUE(testing::wait_until([&] { return ex.idle_engines() == 2; }, std::chrono::seconds(30)));
  }
  std::vector<SegmentTask> group;
  for (uint64_t i = 0; i < n; ++i) group.push_back({0, i, segment_for(model->config, i), TaskInput::kPcm});
  EXPECT_TRUE(ex.try_submit(group));
  ex.wait_idle();
  std::lock_guard<std::mutex> lock(mu);
  return batches;
}

// Work that comes in groups (a stateful model's lanes go round as the groups
// their calls made) is shared: one engine taking all 40 while the other idles
// would halve the throughput.
TEST(ThreadModeTest, TwoIdleEnginesSplitAQueuedGroupBetweenThem) {
  const std::vector<uint32_t> batches = calls_of_a_group(load_model(COREPOOL_DEFAULT_MODEL), 64, 40, true);
  ASSERT_GE(batches.size(), 2u);
  for (const uint32_t b : batches) EXPECT_LE(b, 20u) << "an engine took more than its half";
}

// The same split for a group queued the moment the executor is up, before
// the engines are back in their wait for work: an engine on its way there
// counts as free. Counting only the engines asleep in the wait, the first one
// there took the whole group and the other idled (Silero's 200 files' lanes,
// queued as the engines came up, ran whole on one engine: half the speed).
// Several executors, as the race between the two is not the same each time.
TEST(ThreadModeTest, AGroupQueuedAsTheEnginesComeUpIsSplitBetweenThem) {
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  // Threads that keep every cpu busy (as the files opening do in a batch run):
  // an engine thread that has just started is then often kept off the cpu
  // before it reaches its wait.
  std::atomic<bool> spin{true};
  std::vector<std::thread> spinners;
  for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency()); ++i) {
    spinners.emplace_back([&] {
      while (spin.load(std::memory_order_relaxed)) {
      }
    });
  }
  for (int round = 0; round < 8; ++round) {
    for (const uint32_t b : calls_of_a_group(model, 16, 16, false)) {
      EXPECT_LE(b, 8u) << "round " << round << ": an engine took more than its half";
    }
  }
  spin = false;
  for (auto& t : spinners) t.join();
}

// A completion that submits (a stateful model's lanes going on from their
// call) puts the tasks in its own engine's queue: that engine runs them, as
// one batch, even while the other engine waits idle for work. Through the
// common queue the idle engine was woken and took them (the completion below
// holds its engine 50 ms after the submit, time enough for that).
TEST(ThreadModeTest, TasksSubmittedByACompletionRunOnItsEngineWhileAnotherIdles) {
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  std::mutex mu;
  std::map<uint64_t, std::thread::id> ran_on;
  std::map<uint64_t, uint32_t> batch_of;
  ThreadExecutor* self = nullptr;
  std::atomic<bool> resubmitted{false};
  ThreadExecutor ex(model, {2, 8, 0, {}}, [&](SegmentResult&& r) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ran_on[r.index] = std::this_thread::get_id();
      batch_of[r.index] = r.timing.batch;
    }
    if (r.index != 0 || resubmitted.exchange(true)) return;
    std::vector<SegmentTask> next;
    for (uint64_t i = 1; i <= 4; ++i) next.push_back({0, i, segment_for(model->config, i)});
    EXPECT_TRUE(self->try_submit(next));
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (self->idle_engines() < 1 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    // The window under test: nothing signals that an idle engine did not take
    // the tasks, so it is given 50 ms to (it takes them within microseconds).
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  });
  self = &ex;
  std::vector<SegmentTask> first{{0, 0, segment_for(model->config, 0)}};
  ASSERT_TRUE(ex.try_submit(first));
  ex.wait_idle();
  ASSERT_EQ(ran_on.size(), 5u);
  for (uint64_t i = 1; i <= 4; ++i) {
    EXPECT_EQ(ran_on.at(i), ran_on.at(0)) << "task " << i << " ran on the other engine";
    EXPECT_EQ(batch_of.at(i), 4u) << "task " << i;
  }
}

TEST(ThreadModeTest, AMisshapenSegmentFailsAloneAndTheOthersSucceed) {
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  std::mutex mu;
  std::map<uint64_t, std::string> errors;
  int ok = 0;
  {
    ThreadExecutor ex(model, {2, 4, 0, {}}, [&](SegmentResult&& r) {
      std::lock_guard<std::mutex> lock(mu);
      if (r.error.empty()) ++ok;
      else errors[r.index] = r.error;
    });
    for (uint64_t i = 0; i < 8; ++i) {
      std::vector<float> s = segment_for(model->config, i);
      if (i == 5) s.resize(100);
      ex.submit({0, i, std::move(s)});
    }
    ex.wait_idle();
  }
  EXPECT_EQ(ok, 7);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[5], HasSubstr("100 samples"));
}

TEST(ThreadModeTest, AModelWithTheWrongOutputShapeFailsAtStartup) {
  testing::TempDir dir;
  std::filesystem::copy_file(std::string(COREPOOL_DEFAULT_MODEL) + "/model.pt", dir / "model.pt");
  ModelConfig cfg = load_model_config(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml");
  cfg.labels.push_back("extra");
  cfg.thresholds.push_back(0.5f);
  std::ofstream(dir / "model.toml") << to_toml(cfg);
  auto model = load_model(dir.path());
  EXPECT_THROW(ThreadExecutor(model, {2, 1, 0, {}}, [](SegmentResult&&) {}), ModelError);
}

// Each engine thread runs one full batch before the executor starts (it warms
// the thread for full batches): a model that cannot run max_batch items fails
// at startup, not at the first full batch. The model's own limit is the reference.
TEST(ThreadModeTest, EveryEngineThreadRunsAFullBatchBeforeTheExecutorStarts) {
  testing::TempDir dir;
  auto model = load_model(testing::batch_limited_model_dir(dir, 2));
  EXPECT_NO_THROW(ThreadExecutor(model, {2, 2, 0, {}}, [](SegmentResult&&) {}));
  try {
    ThreadExecutor(model, {2, 4, 0, {}}, [](SegmentResult&&) {});
    FAIL() << "a model that fails on 4 items started with max_batch 4";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), HasSubstr("a batch of 4 silent segments"));
    EXPECT_THAT(e.what(), HasSubstr("more items than the limit"));
  }
}

// Engine threads run forward() as process-mode workers and main() do: with
// the graph executor's optimisation off. LibTorch keeps that switch per
// thread, and an engine thread left at its default profiled and re-optimised
// the graph on its first calls (60-110 ms of Silero VAD's warm-up, with the
// other engines waiting on the graph's lock). The probe: an executor that
// optimised keeps an optimised plan, which getDebugState() returns; one that
// never did has none. The probe is checked on the same graph by a thread
// left at LibTorch's default.
bool has_optimized_plan(torch::jit::GraphFunction& forward) {
  try {
    forward.getDebugState();
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

TEST(ThreadModeTest, EngineThreadsRunTheGraphUnoptimizedAsWorkersDo) {
  torch::jit::setGraphExecutorOptimize(false);  // as main() has for its own thread
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  auto& forward = torch::jit::toGraphFunction(module_of(*model).get_method("forward").function());
  ASSERT_FALSE(has_optimized_plan(forward)) << "loading the model optimised its graph";
  EXPECT_EQ(run_segments(model, 2, 4, 16).size(), 16u);  // warm-up calls and batches on both engines
  EXPECT_FALSE(has_optimized_plan(forward)) << "an engine thread ran the graph executor's optimisation";
  std::thread([&] {  // LibTorch's default: on
    const auto input = torch::zeros(model->config.item_shape()).unsqueeze(0);
    c10::InferenceMode guard;
    for (int call = 0; call < 3; ++call) module_of(*model).forward({input});
  }).join();
  EXPECT_TRUE(has_optimized_plan(forward)) << "the probe cannot see an optimised graph";
}

// An engine thread keeps its freed activations for the next batch (its
// EngineArena has no time-based decay) and gives them back once it has been
// idle for 100 ms. Runs on jemalloc with corepool's MALLOC_CONF, in a child.
TEST(ThreadModeTest, AnIdleEngineThreadGivesItsActivationsBack) {
  if (!testing::jemalloc_usable()) GTEST_SKIP() << COREPOOL_JEMALLOC_LIBRARY << " is not installed";
  const auto r = testing::run_self_test_on_jemalloc("DISABLED_ThreadModeChild.IdlePurge", kDefaultMallocConf);
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
}

TEST(DISABLED_ThreadModeChild, IdlePurge) {
  ASSERT_GE(testing::jemalloc_dirty_pages(), 0) << "jemalloc preloaded";
  auto model = load_model(COREPOOL_CNN10_MODEL);  // CNN10: tens of MB of activations at batch 8
  // The first reading is taken in the last result's callback, on the engine
  // thread itself: it cannot be idle (and purge) before the callback returns,
  // however late this process gets the cpu.
  constexpr uint64_t kSegments = 16;
  std::atomic<uint64_t> done{0};
  std::atomic<long> kept{-1};
  ThreadExecutor ex(model, {1, 8, 0, {}}, [&](SegmentResult&& r) {
    EXPECT_TRUE(r.error.empty()) << r.error;
    if (++done == kSegments) kept = testing::jemalloc_dirty_pages();
  });
  for (uint64_t i = 0; i < kSegments; ++i) ex.submit({0, i, segment_for(model->config, i)});
  ex.wait_idle();
  // CNN10 at batch 8 frees tens of MB of activations per forward().
  const long held = kept.load();
  EXPECT_GE(held, (16l << 20) / 4096) << "the engine thread's freed activations were not kept";
  // The engine purges once idle for 100 ms; the deadline only bounds a failure.
  EXPECT_TRUE(testing::wait_until([&] { return testing::jemalloc_dirty_pages() <= held / 4; },
                                  std::chrono::seconds(30)))
      << "still held " << testing::jemalloc_dirty_pages() << " dirty pages of " << held << " after 30 s idle";
}

}  // namespace
}  // namespace corepool
