// ProcessPool in-process: poison input, hung workers, boot failures and 200
// respawns under load. Each case runs in a fresh copy of this test binary
// (libuv's spawn_helper pattern): the pool forks, and the parent of a fork must
// not have run LibTorch ops or OpenMP regions, which other tests in this binary do.
// The DISABLED_ cases are the child bodies; the ProcessPoolTest cases run them.
#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "supervisor/pool/process_pool.h"
#include "tests/engine/small_model.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// Runs DISABLED_PoolChild.<name> in a fresh process and expects it to pass.
void run_child(const std::string& name, const std::vector<std::string>& env = {}) {
  testing::TempDir dir;
  const auto r = testing::run_self_test("DISABLED_PoolChild." + name, dir.path(), std::chrono::seconds(240), env);
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
}


std::vector<float> segment(const ModelConfig& cfg, uint64_t i) {
  std::vector<float> v(cfg.segment_samples());
  for (size_t k = 0; k < v.size(); ++k) v[k] = 0.1f * static_cast<float>(((k * 31 + i * 7) % 200) / 100.0 - 1.0);
  return v;
}

// Collects results; checks exactly-once delivery.
struct Results {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, SegmentResult> by_index;
  int duplicates = 0;
  void add(SegmentResult&& r) {
    std::lock_guard<std::mutex> lock(mu);
    if (!by_index.emplace(r.index, std::move(r)).second) ++duplicates;
    cv.notify_all();
  }
  bool wait_for(size_t n, std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return by_index.size() >= n; });
  }
};

// Eight segments of stream 1, each answered without an error within 60 s.
void expect_eight_answered(ProcessPool& pool, const ModelConfig& config, Results& results) {
  for (uint64_t i = 0; i < 8; ++i) pool.submit({1, i, segment(config, i)});
  ASSERT_TRUE(results.wait_for(8, std::chrono::seconds(60)));
  for (auto& [index, r] : results.by_index) EXPECT_TRUE(r.error.empty()) << index << ": " << r.error;
}

TEST(ProcessPoolTest, APoisonInputFailsAfterTwoCrashesAndTheOthersSucceed) {
  run_child("PoisonInput", {"COREPOOL_TEST_CRASH_ON_MARKER=1"});
}
TEST(ProcessPoolTest, AWorkerKilledWithAFullBatchOf256AndAFullRingLosesNoRequest) {
  run_child("CrashWithFullRing", {"COREPOOL_TEST_CRASH_ON_MARKER=1"});
}
TEST(ProcessPoolTest, AHungWorkerIsKilledAndItsSegmentsAnsweredByOthers) { run_child("HungWorker"); }
TEST(ProcessPoolTest, AWorkerWhoseBootOutlastsTheHangDeadlineIsNotKilledOnceReady) {
  // Boot 1.5 s, hang deadline 1 s, and the worker does not reach its loop's
  // first beat until 0.4 s after it said ready: the supervisor's ticks in
  // between must judge it by a beat taken at ready, not at the boot's start.
  run_child("SlowBoot", {"COREPOOL_TEST_BOOT_DELAY_MS=1500", "COREPOOL_TEST_STALL_AFTER_READY_MS=400"});
}
TEST(ProcessPoolTest, ABatchPoolServesFromItsFirstReadyWorkerWhileTheOtherBoots) {
  // Worker 1 boots 20 s (slot 1 only); the pool must not wait for it.
  run_child("FirstReady", {"COREPOOL_TEST_BOOT_DELAY_MS=20000", "COREPOOL_TEST_PAUSE_SLOT=1"});
}
TEST(ProcessPoolTest, AModelThatCannotStartIsAModelError) { run_child("BootFailure"); }
TEST(ProcessPoolTest, TheFirstWorkersRunAFullBatchBeforeTheyAreReady) { run_child("FullBatchAtBoot"); }
TEST(ProcessPoolTest, TwoHundredRespawnsUnderLoadNeitherHangNorLoseASegment) { run_child("Respawn200"); }

TEST(DISABLED_PoolChild, PoisonInput) {
  testing::TempDir dir;
  auto model = testing::small_model(dir);
  Results results;
  ProcessPool pool(model, {2, 4, 0, 0, {}, 10000, 120000, 2, "warn", false},
                   [&](SegmentResult&& r) { results.add(std::move(r)); });
  for (uint64_t i = 0; i < 40; ++i) {
    std::vector<float> s = segment(model->config, i);
    if (i == 17) s[0] = 12345.0f, s[1] = -12345.0f;  // the worker's test hook crashes on this
    pool.submit({1, i, std::move(s)});
  }
  ASSERT_TRUE(results.wait_for(40, std::chrono::seconds(120)));
  pool.wait_idle();
  EXPECT_EQ(results.duplicates, 0);
  for (auto& [index, r] : results.by_index) {
    if (index == 17) {
      EXPECT_THAT(r.error, HasSubstr("poison input"));
    } else {
      EXPECT_TRUE(r.error.empty()) << index << ": " << r.error;
    }
  }
  EXPECT_EQ(pool.counters().poisoned, 1u);
  EXPECT_TRUE(testing::wait_until([&] { return pool.all_ready(); }, std::chrono::seconds(30))) << "pool did not heal";
}

// One worker, batches of 256 (until issue 39 a batch and a ring held 64), and
// twice that submitted at once: the worker waits for a full first batch (the
// long batch delay), which holds the poison input, and crashes in it while
// the second batch waits in its ring (512 slots for this model's 8 KB items).
// Every request must come back exactly once: the 256 of the running list as
// suspects (each then runs alone), the ring's as innocents, and the poison
// input fails after its second crash.
TEST(DISABLED_PoolChild, CrashWithFullRing) {
  testing::TempDir dir;
  auto model = load_model(testing::short_segment_model_dir(dir));
  constexpr uint64_t kBatch = 256, kTotal = 2 * kBatch;
  Results results;
  ProcessPoolOptions o;
  o.workers = 1;
  o.max_batch = kBatch;
  o.max_batch_delay_us = 60 * 1000 * 1000;  // the first batch runs full
  o.queue_depth = kTotal;
  o.hang_timeout_ms = 600000;               // only the crashes replace the worker
  o.log_level = "off";
  ProcessPool pool(model, o, [&](SegmentResult&& r) { results.add(std::move(r)); });
  std::vector<SegmentTask> tasks;
  for (uint64_t i = 0; i < kTotal; ++i) {
    std::vector<float> s = segment(model->config, i);
    if (i == 0) s[0] = 12345.0f, s[1] = -12345.0f;  // the worker's test hook crashes on this
    tasks.push_back({1, i, std::move(s)});
  }
  ASSERT_TRUE(pool.try_submit(tasks));
  ASSERT_TRUE(results.wait_for(kTotal, std::chrono::seconds(120)));
  pool.wait_idle();
  EXPECT_EQ(results.duplicates, 0);
  for (auto& [index, r] : results.by_index) {
    if (index == 0) {
      EXPECT_THAT(r.error, HasSubstr("poison input"));
    } else {
      EXPECT_TRUE(r.error.empty()) << index << ": " << r.error;
    }
  }
  // The whole first batch was on the running list: its 255 innocents ran
  // alone as suspects. The second half was never suspect: it ran as one
  // full batch after the crashes.
  size_t alone = 0;
  for (auto& [index, r] : results.by_index) alone += r.error.empty() && r.timing.batch == 1;
  EXPECT_EQ(alone, kBatch - 1);
  EXPECT_EQ(results.by_index.at(kTotal - 1).timing.batch, kBatch);
  const PoolCounters c = pool.counters();
  EXPECT_EQ(c.poisoned, 1u);
  EXPECT_GE(c.redispatched, kBatch) << "the first crash sends back at least its running batch";
  EXPECT_GE(c.restarts, 2u);
  EXPECT_TRUE(testing::wait_until([&] { return pool.all_ready(); }, std::chrono::seconds(30))) << "pool did not heal";
}

TEST(DISABLED_PoolChild, HungWorker) {
  testing::TempDir dir;
  auto model = testing::small_model(dir);
  Results results;
  // The hang deadline (5 s) is also the time a replacement has to boot, and a
  // loaded machine's healthy worker may miss a shorter one (700 ms did): only
  // the stopped worker may trip it. Every wait below is on an event.
  ProcessPool pool(model, {2, 2, 0, 0, {}, 5000, 120000, 2, "warn", false},
                   [&](SegmentResult&& r) { results.add(std::move(r)); });
  const std::vector<int> before = pool.worker_pids();
  ::kill(before[0], SIGSTOP);
  for (uint64_t i = 0; i < 30; ++i) pool.submit({1, i, segment(model->config, i)});
  ASSERT_TRUE(results.wait_for(30, std::chrono::seconds(60)));
  pool.wait_idle();
  for (auto& [index, r] : results.by_index) EXPECT_TRUE(r.error.empty()) << index << ": " << r.error;
  EXPECT_TRUE(testing::wait_until([&] { return pool.all_ready() && pool.worker_pids()[0] != before[0]; },
                         std::chrono::seconds(30)));
  EXPECT_GE(pool.counters().restarts, 1u);
}

TEST(DISABLED_PoolChild, SlowBoot) {
  testing::TempDir dir;
  auto model = testing::small_model(dir);
  Results results;
  ProcessPoolOptions o;
  o.workers = 1;
  o.hang_timeout_ms = 1000;
  o.log_level = "warn";
  ProcessPool pool(model, o, [&](SegmentResult&& r) { results.add(std::move(r)); });
  const std::vector<int> pids = pool.worker_pids();
  ASSERT_NO_FATAL_FAILURE(expect_eight_answered(pool, model->config, results));
  EXPECT_EQ(pool.counters().restarts, 0u);
  EXPECT_EQ(pool.worker_pids(), pids);
}

// start_on_first_ready (corepool batch): the constructor returns with worker
// 0 ready and worker 1 still in its 20 s boot, every segment is answered by
// worker 0 (a starting worker takes work only when the ready ones are full),
// and worker 1 is still booting after them. With the old start (wait for every worker)
// the constructor itself would take the 20 s and all_ready() would be true.
TEST(DISABLED_PoolChild, FirstReady) {
  testing::TempDir dir;
  auto model = testing::small_model(dir);
  Results results;
  ProcessPoolOptions o;
  o.workers = 2;
  o.log_level = "warn";
  o.start_on_first_ready = true;
  ProcessPool pool(model, o, [&](SegmentResult&& r) { results.add(std::move(r)); });
  EXPECT_FALSE(pool.all_ready());
  ASSERT_NO_FATAL_FAILURE(expect_eight_answered(pool, model->config, results));
  const ExecutorStats s = pool.stats();
  EXPECT_FALSE(s.all_ready) << "worker 1 came up before its 20 s boot ended";
  ASSERT_EQ(s.busy_seconds.size(), 2u);
  EXPECT_EQ(s.busy_seconds[1], 0.0) << "a segment waited in the ring of the worker still booting";
  EXPECT_EQ(pool.counters().restarts, 0u);
}

TEST(DISABLED_PoolChild, BootFailure) {
  testing::TempDir dir;
  auto good = testing::small_model(dir);
  ModelConfig cfg = good->config;
  cfg.labels.push_back("one-too-many");
  cfg.thresholds.push_back(0.5f);
  std::filesystem::create_directories(dir / "bad");
  std::filesystem::copy_file(dir / "model/model.pt", dir / "bad/model.pt");
  std::ofstream(dir / "bad/model.toml") << to_toml(cfg);
  auto bad = load_model(dir / "bad");
  EXPECT_THROW(ProcessPool(bad, {2, 1, 0, 0, {}, 10000, 60000, 2, "off", false}, [](SegmentResult&&) {}),
               ModelError);
}

// The first generation of workers runs a full batch before it is ready.
TEST(DISABLED_PoolChild, FullBatchAtBoot) {
  testing::TempDir dir;
  auto model = load_model(testing::batch_limited_model_dir(dir, 2));
  EXPECT_NO_THROW(ProcessPool(model, {2, 2, 0, 0, {}, 10000, 60000, 2, "off", false}, [](SegmentResult&&) {}));
  EXPECT_THROW(ProcessPool(model, {2, 4, 0, 0, {}, 10000, 60000, 2, "off", false}, [](SegmentResult&&) {}),
               ModelError);
}

TEST(DISABLED_PoolChild, Respawn200) {
  testing::TempDir dir;
  auto model = testing::small_model(dir);
  Results results;
  ProcessPool pool(model, {2, 2, 0, 16, {}, 10000, 120000, 1000, "warn", false},
                   [&](SegmentResult&& r) { results.add(std::move(r)); });
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> submitted{0};
  // The supervisor is busy while workers are killed: a producer keeps the
  // queue full, a thread logs, a thread reads files.
  std::thread producer([&] {
    for (uint64_t i = 0; !stop; ++i) {
      pool.submit({1, i, segment(model->config, i)});
      ++submitted;
    }
  });
  std::thread logger([&] {
    for (int i = 0; !stop; ++i) spdlog::debug("busy supervisor log line {}", i);
  });
  std::thread reader([&] {
    while (!stop) testing::read_file("/proc/self/status");
  });
  int respawns = 0;
  for (int k = 0; k < 200; ++k) {
    const std::vector<int> pids = pool.worker_pids();
    const int victim = pids[k % 2];
    if (victim <= 0) continue;
    ::kill(victim, SIGKILL);
    const bool back = testing::wait_until([&] {
      const auto now = pool.worker_pids();
      return now[k % 2] != victim && now[k % 2] > 0 && pool.all_ready();
    }, std::chrono::seconds(20));
    ASSERT_TRUE(back) << "no replacement after kill " << k;
    ++respawns;
  }
  stop = true;
  producer.join();
  logger.join();
  reader.join();
  ASSERT_TRUE(results.wait_for(submitted, std::chrono::seconds(120)));
  pool.wait_idle();
  EXPECT_EQ(respawns, 200);
  EXPECT_EQ(results.duplicates, 0);
  EXPECT_EQ(results.by_index.size(), submitted.load());
  for (auto& [index, r] : results.by_index) EXPECT_TRUE(r.error.empty()) << index << ": " << r.error;
  EXPECT_GE(pool.counters().restarts, 200u);
}

}  // namespace
}  // namespace corepool
