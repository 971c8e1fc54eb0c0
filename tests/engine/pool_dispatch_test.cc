// Where ProcessPool's work goes and how it is grouped: least-loaded dispatch
// around a stopped worker, the worker's wait for a fuller batch
// (max_batch_delay_us), and each worker pinned to its cpu, replacements too.
// Each case runs in a fresh copy of this test binary (libuv's spawn_helper
// pattern): the pool forks, and the parent of a fork must not have run
// LibTorch ops, which other tests in this binary do. The DISABLED_ cases are
// the child bodies; the PoolDispatchTest cases run them.
#include <sched.h>

#include <filesystem>
#include <future>
#include <map>
#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "supervisor/pool/process_pool.h"
#include "tests/engine/segments.h"
#include "tests/engine/small_model.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;

void run_child(const std::string& name) {
  testing::TempDir dir;
  const auto r = testing::run_self_test("DISABLED_DispatchChild." + name, dir.path(), std::chrono::seconds(240));
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
}


struct Results {
  std::mutex mu;
  std::map<uint64_t, SegmentResult> by_index;
  int duplicates = 0;
  void add(SegmentResult&& r) {
    std::lock_guard<std::mutex> lock(mu);
    if (!by_index.emplace(r.index, std::move(r)).second) ++duplicates;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return by_index.size();
  }
  bool has(uint64_t index) {
    std::lock_guard<std::mutex> lock(mu);
    return by_index.count(index) != 0;
  }
  bool wait_for(uint64_t index, std::chrono::seconds timeout) {
    return testing::wait_until([&] { return has(index); }, timeout);
  }
};

ProcessPoolOptions options(int workers, int max_batch) {
  ProcessPoolOptions o;
  o.workers = workers;
  o.max_batch = max_batch;
  o.hang_timeout_ms = 600000;  // a stopped or waiting worker is never killed as hung here
  o.log_level = "warn";
  return o;
}

// The state letter of /proc/PID/stat ('R', 'S', 'T' for stopped, ...).
char proc_state(int pid) {
  const std::string stat = testing::read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : '?';
}

std::string cpus_allowed_list(int pid) {
  for (const auto& line : testing::lines_of(testing::read_file("/proc/" + std::to_string(pid) + "/status"))) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      const auto value = line.find_first_not_of(" \t", line.find(':') + 1);
      return value == std::string::npos ? "" : line.substr(value);
    }
  }
  return "";
}

TEST(PoolDispatchTest, SegmentsGoToTheIdleWorkerWhileTheOtherIsStopped) { run_child("LeastLoaded"); }
TEST(PoolDispatchTest, WithALongBatchDelaySegmentsSubmittedOneByOneRunAsOneBatch) { run_child("LongDelay"); }
TEST(PoolDispatchTest, WithNoBatchDelayALoneSegmentRunsAtOnceByItself) { run_child("NoDelay"); }
TEST(PoolDispatchTest, EachWorkerIsPinnedToItsCpuAndItsReplacementToTheSame) { run_child("Pinning"); }
TEST(PoolDispatchTest, AWorkerRunsBatchesAboveTheOld64OfOneSecondSegments) { run_child("BigBatches"); }
TEST(PoolDispatchTest, PlainSegmentsAvoidAWorkerHoldingAFollowUpOfItsOwn) { run_child("FollowUp"); }

TEST(DISABLED_DispatchChild, LeastLoaded) {
  testing::TempDir dir;
  auto model = testing::small_model(dir);
  const size_t samples = model->config.segment_samples();
  Results results;
  ProcessPool pool(model, options(2, 4), [&](SegmentResult&& r) { results.add(std::move(r)); });
  const std::vector<int> pids = pool.worker_pids();
  ::kill(pids[0], SIGSTOP);
  // Whatever fails below, the worker runs again before the pool drains.
  const std::unique_ptr<const int, void (*)(const int*)> resume(&pids[0],
                                                                 [](const int* pid) { ::kill(*pid, SIGCONT); });
  ASSERT_TRUE(testing::wait_until([&] { return proc_state(pids[0]) == 'T'; }, std::chrono::seconds(30)));

  // One by one, each answered before the next is sent. The stopped worker
  // holds whatever it was given (at most the first segment, on a tie); any
  // later segment sent its way would never be answered. Round robin, or
  // always the first slot, fails here.
  pool.submit({1, 0, testing::test_segment(samples, 0)});
  const uint64_t n = 12;
  for (uint64_t i = 1; i <= n; ++i) {
    pool.submit({1, i, testing::test_segment(samples, i)});
    ASSERT_TRUE(results.wait_for(i, std::chrono::seconds(30))) << "segment " << i << " went to the stopped worker";
  }
  const ExecutorStats during = pool.stats();
  EXPECT_EQ(proc_state(pids[0]), 'T');
  EXPECT_EQ(during.busy_seconds[0], 0.0) << "the stopped worker ran something";
  EXPECT_GT(during.busy_seconds[1], 0.0);
  EXPECT_GE(during.segments, n);

  ::kill(pids[0], SIGCONT);
  ASSERT_TRUE(testing::wait_until([&] { return results.size() == n + 1; }, std::chrono::seconds(60)));
  pool.wait_idle();
  EXPECT_EQ(results.duplicates, 0);
  for (auto& [index, r] : results.by_index) EXPECT_TRUE(r.error.empty()) << index << ": " << r.error;
  EXPECT_EQ(pool.worker_pids(), pids) << "no worker should have been replaced";
  EXPECT_EQ(pool.counters().redispatched, 0u);
}

TEST(DISABLED_DispatchChild, LongDelay) {
  testing::TempDir dir;
  auto model = testing::small_model(dir);
  const size_t samples = model->config.segment_samples();
  Results results;
  ProcessPoolOptions o = options(1, 4);
  o.max_batch_delay_us = 60 * 1000 * 1000;  // a batch fills up long before this
  ProcessPool pool(model, o, [&](SegmentResult&& r) { results.add(std::move(r)); });
  pool.submit({1, 0, testing::test_segment(samples, 0)});
  // The first segment waits for company: no answer may come while it is alone.
  // (A window, not a synchronisation: a worker that does not wait would
  // usually answer within it; a waiting one never does.)
  EXPECT_FALSE(testing::wait_until([&] { return results.size() > 0; }, std::chrono::milliseconds(500)))
      << "a lone segment ran without waiting for its batch";
  for (uint64_t i = 1; i < 3; ++i) {
    pool.submit({1, i, testing::test_segment(samples, i)});
    EXPECT_FALSE(testing::wait_until([&] { return results.size() > 0; }, std::chrono::milliseconds(100)))
        << "segment " << i << ": a part batch ran";
  }
  pool.submit({1, 3, testing::test_segment(samples, 3)});  // the batch is full: it runs now
  ASSERT_TRUE(testing::wait_until([&] { return results.size() == 4; }, std::chrono::seconds(60)));
  pool.wait_idle();
  const ExecutorStats s = pool.stats();
  EXPECT_EQ(s.segments, 4u);
  EXPECT_EQ(s.batches, 1u) << "four segments submitted one by one should have run as one forward()";
  for (auto& [index, r] : results.by_index) EXPECT_TRUE(r.error.empty()) << index << ": " << r.error;
}

// Until the ring and the batch were decoupled (issue 39), a worker's batch was
// clamped to its ring's 64 slots: max_batch 128 ran four forward()s of 64
// here. With 1 s segments (130 slab slots) two batches of 128 submitted at
// once must run as two forward()s of 128 (the long batch delay makes a part
// batch wait for company, so only the slots and the clamp can split them).
TEST(DISABLED_DispatchChild, BigBatches) {
  testing::TempDir dir;
  auto model = testing::small_model(dir);
  const size_t samples = model->config.segment_samples();
  constexpr uint64_t kBatch = 128;
  Results results;
  ProcessPoolOptions o = options(1, kBatch);
  o.max_batch_delay_us = 60 * 1000 * 1000;  // a batch fills up long before this
  ProcessPool pool(model, o, [&](SegmentResult&& r) { results.add(std::move(r)); });
  std::vector<SegmentTask> tasks;
  for (uint64_t i = 0; i < 2 * kBatch; ++i) tasks.push_back({1, i, testing::test_segment(samples, i)});
  ASSERT_TRUE(pool.try_submit(tasks)) << "the queue holds 4 x max_batch";
  ASSERT_TRUE(testing::wait_until([&] { return results.size() == 2 * kBatch; }, std::chrono::seconds(120)));
  pool.wait_idle();
  const ExecutorStats s = pool.stats();
  EXPECT_EQ(s.segments, 2 * kBatch);
  EXPECT_EQ(s.batches, 2u) << "two batches of " << kBatch << " should have run as two forward()s";
  EXPECT_EQ(results.duplicates, 0);
  for (auto& [index, r] : results.by_index) {
    EXPECT_TRUE(r.error.empty()) << index << ": " << r.error;
    EXPECT_EQ(r.timing.batch, kBatch) << "segment " << index;
  }
}

TEST(DISABLED_DispatchChild, NoDelay) {
  testing::TempDir dir;
  auto model = testing::small_model(dir);
  const size_t samples = model->config.segment_samples();
  Results results;
  ProcessPool pool(model, options(1, 4), [&](SegmentResult&& r) { results.add(std::move(r)); });
  // Each segment alone, answered before the next is sent: a worker that
  // waited for a fuller batch would never answer the first.
  for (uint64_t i = 0; i < 4; ++i) {
    pool.submit({1, i, testing::test_segment(samples, i)});
    ASSERT_TRUE(results.wait_for(i, std::chrono::seconds(60))) << "segment " << i << " waited for company";
    const ExecutorStats s = pool.stats();
    EXPECT_EQ(s.batches, i + 1);
    EXPECT_EQ(s.segments, i + 1);
  }
  for (auto& [index, r] : results.by_index) EXPECT_TRUE(r.error.empty()) << index << ": " << r.error;
}

// A completion's follow-up (what it submits, back to its own worker) is
// waiting in a worker that is stopped; the segments submitted next, all at
// once, must go to the other worker and be answered while it stays stopped.
// Least-loaded by slots alone sends every second one to the stopped worker
// (one slot each, then ties), and they are not answered until it runs again.
TEST(DISABLED_DispatchChild, FollowUp) {
  testing::TempDir dir;
  auto model = testing::small_model(dir);
  const size_t samples = model->config.segment_samples();
  constexpr uint64_t kFollowUp = 100, kPlain = 8;
  Results results;
  std::promise<int> held;  // the stopped worker's index, once its follow-up is submitted
  ProcessPool* pool_ptr = nullptr;
  std::vector<int> pids;
  ProcessPool pool(model, options(2, 4), [&](SegmentResult&& r) {
    if (r.index == 0) {
      // On the loop thread, delivering worker r.timing.engine's completion:
      // stop it, then give it a follow-up.
      const int pid = pids.at(static_cast<size_t>(r.timing.engine));
      ::kill(pid, SIGSTOP);
      EXPECT_TRUE(testing::wait_until([&] { return proc_state(pid) == 'T'; }, std::chrono::seconds(30)));
      std::vector<SegmentTask> next{{1, kFollowUp, testing::test_segment(samples, kFollowUp)}};
      EXPECT_TRUE(pool_ptr->try_submit(next));
      held.set_value(r.timing.engine);
    }
    results.add(std::move(r));
  });
  pool_ptr = &pool;
  pids = pool.worker_pids();
  pool.submit({1, 0, testing::test_segment(samples, 0)});
  std::future<int> stopped = held.get_future();
  ASSERT_EQ(stopped.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  const int w = stopped.get();
  const std::unique_ptr<const int, void (*)(const int*)> resume(&pids.at(static_cast<size_t>(w)),
                                                                 [](const int* pid) { ::kill(*pid, SIGCONT); });
  std::vector<SegmentTask> plain;
  for (uint64_t i = 1; i <= kPlain; ++i) plain.push_back({1, i, testing::test_segment(samples, i)});
  ASSERT_TRUE(pool.try_submit(plain));
  for (uint64_t i = 1; i <= kPlain; ++i) {
    ASSERT_TRUE(results.wait_for(i, std::chrono::seconds(30))) << "segment " << i << " went to the stopped worker";
  }
  EXPECT_FALSE(results.has(kFollowUp)) << "the follow-up ran, so its worker was not stopped";
  for (uint64_t i = 1; i <= kPlain; ++i) {
    std::lock_guard<std::mutex> lock(results.mu);
    EXPECT_NE(results.by_index[i].timing.engine, w) << "segment " << i;
  }

  ::kill(pids.at(static_cast<size_t>(w)), SIGCONT);
  ASSERT_TRUE(results.wait_for(kFollowUp, std::chrono::seconds(60)));
  pool.wait_idle();
  std::lock_guard<std::mutex> lock(results.mu);
  EXPECT_EQ(results.by_index[kFollowUp].timing.engine, w) << "a follow-up goes to the worker whose completion made it";
  EXPECT_EQ(results.duplicates, 0);
  for (auto& [index, r] : results.by_index) EXPECT_TRUE(r.error.empty()) << index << ": " << r.error;
}

TEST(DISABLED_DispatchChild, Pinning) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  ASSERT_EQ(::sched_getaffinity(0, sizeof mask, &mask), 0);
  std::vector<int> allowed;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mask)) allowed.push_back(c);
  }
  if (allowed.size() < 2) GTEST_SKIP() << "needs two usable cpus to tell pinning from none";
  const std::string own = cpus_allowed_list(::getpid());
  // Reversed, and one worker more than cpus: worker i -> cpus[i % size] is
  // then neither the identity nor what an unpinned worker inherits.
  const std::vector<int> cpus(allowed.rbegin(), allowed.rend());
  testing::TempDir dir;
  auto model = testing::small_model(dir);
  ProcessPoolOptions o = options(static_cast<int>(cpus.size()) + 1, 1);
  o.cpus = cpus;
  ProcessPool pool(model, o, [](SegmentResult&&) {});
  const std::vector<int> pids = pool.worker_pids();
  for (size_t i = 0; i < pids.size(); ++i) {
    EXPECT_EQ(cpus_allowed_list(pids[i]), std::to_string(cpus[i % cpus.size()])) << "worker " << i;
  }
  EXPECT_EQ(cpus_allowed_list(::getpid()), own) << "pinning a worker must not pin the supervisor";

  const int victim = pids[1];
  ::kill(victim, SIGKILL);
  ASSERT_TRUE(testing::wait_until([&] {
    const int now = pool.worker_pids()[1];
    return now != victim && now > 0 && pool.all_ready();
  }, std::chrono::seconds(60)));
  EXPECT_EQ(cpus_allowed_list(pool.worker_pids()[1]), std::to_string(cpus[1])) << "the replacement of worker 1";
}

}  // namespace
}  // namespace corepool
