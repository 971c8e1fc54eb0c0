// Process mode's memory claim, measured: with the weights in one shared
// segment, each added worker costs far less than a copy of them in PSS (the
// proportional set: a page shared by k processes counts 1/k in each), while
// with naive weights (each worker loads its own copy) each added worker costs
// about one copy; the contrast shows the measurement can tell the two apart.
// Each pool runs in a fresh copy of this test binary (libuv's spawn_helper
// pattern), so every measurement starts from the same process image and the
// parent of the forks has run no LibTorch op.
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "supervisor/pool/allocator.h"
#include "supervisor/pool/process_pool.h"
#include "worker/engine_plan.h"
#include "worker/runtime.h"
#include "tests/engine/segments.h"
#include "tests/support/jemalloc.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;

constexpr const char* kModelEnv = "COREPOOL_TEST_PSS_MODEL";
constexpr const char* kWorkersEnv = "COREPOOL_TEST_PSS_WORKERS";
constexpr const char* kNaiveEnv = "COREPOOL_TEST_PSS_NAIVE";
constexpr const char* kOptimizeEnv = "COREPOOL_TEST_PSS_OPTIMIZE";

// Pss of a process in kB, from /proc/PID/smaps_rollup; -1 if unreadable.
// Anonymous and shared-memory pages only (Pss_Anon + Pss_Shmem): the heaps,
// the weight segment or arena, the rings. File-backed pages (LibTorch's code)
// are shared with every other process that maps the same library, so their
// share moves with whatever else runs on the machine (ctest -j2 runs other
// tests beside this one) and says nothing about the pool.
long pss_kb(int pid) {
  long anon = -1, shmem = -1;
  for (const auto& line : testing::lines_of(testing::read_file("/proc/" + std::to_string(pid) + "/smaps_rollup"))) {
    if (line.rfind("Pss_Anon:", 0) == 0) anon = std::atol(line.c_str() + 9);
    if (line.rfind("Pss_Shmem:", 0) == 0) shmem = std::atol(line.c_str() + 10);
  }
  return anon < 0 || shmem < 0 ? -1 : anon + shmem;
}

struct Measured {
  long pss_kb = -1;  // supervisor + workers
  long weight_bytes = -1;
  long shared_bytes = -1;  // in the optimized weight arena (0 for engine.optimize none)
};

// Runs the pool in a fresh process and reads back what it measured.
// With `optimize` other than none, the child runs on jemalloc with corepool's
// MALLOC_CONF, as the service does (it re-executes itself so, allocator.h).
Measured measure(const std::string& model_dir, int workers, bool naive, const std::string& optimize = "none") {
  testing::TempDir dir;
  std::vector<std::string> env = {std::string(kModelEnv) + "=" + model_dir,
                                  std::string(kWorkersEnv) + "=" + std::to_string(workers),
                                  std::string(kNaiveEnv) + "=" + (naive ? "1" : "0"),
                                  std::string(kOptimizeEnv) + "=" + optimize};
  if (optimize != "none") {
    env.push_back("LD_PRELOAD=libjemalloc.so.2");
    env.push_back(std::string("MALLOC_CONF=") + kDefaultMallocConf);
  }
  const auto r = testing::run_self_test("DISABLED_MemoryChild.MeasurePss", dir.path(), std::chrono::seconds(240), env);
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
  Measured m;
  const auto at = r.out.find("MEASURED pss_kb=");
  if (at != std::string::npos) {
    std::sscanf(r.out.c_str() + at, "MEASURED pss_kb=%ld weight_bytes=%ld shared_bytes=%ld", &m.pss_kb,
                &m.weight_bytes, &m.shared_bytes);
  }
  return m;
}

TEST(PoolMemoryTest, EachAddedWorkerCostsFarLessThanACopyOfTheWeightsUnlessEachLoadsItsOwn) {
  testing::TempDir dir;
  // About 150 MB of weights (one hidden layer): far above what a worker costs
  // on its own (stack, heap pages it writes, LibTorch's per-process state).
  auto gen = testing::run_process(
      {COREPOOL_GEN_MODEL_BIN, "--out", dir / "model", "--width", "8", "--hidden", "600000"}, dir.path());
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  const Measured shared1 = measure(dir / "model", 1, false);
  const Measured shared3 = measure(dir / "model", 3, false);
  const Measured naive1 = measure(dir / "model", 1, true);
  const Measured naive3 = measure(dir / "model", 3, true);
  for (const Measured& m : {shared1, shared3, naive1, naive3}) ASSERT_GT(m.pss_kb, 0);
  const long weights_kb = shared1.weight_bytes / 1024;
  ASSERT_GT(weights_kb, 100 * 1024) << "the model should hold about 150 MB of weights";

  const long shared_per_worker = (shared3.pss_kb - shared1.pss_kb) / 2;
  const long naive_per_worker = (naive3.pss_kb - naive1.pss_kb) / 2;
  const std::string report = "weights " + std::to_string(weights_kb) + " kB; PSS shared 1/3 workers " +
                             std::to_string(shared1.pss_kb) + "/" + std::to_string(shared3.pss_kb) + " kB, naive " +
                             std::to_string(naive1.pss_kb) + "/" + std::to_string(naive3.pss_kb) + " kB";
  std::printf("%s\n", report.c_str());
  EXPECT_LT(shared_per_worker, weights_kb / 4) << report;
  EXPECT_GT(naive_per_worker, weights_kb * 3 / 4) << report;
  // One worker: the shared pool holds the weights once, the naive one twice
  // (the supervisor's load and the worker's own).
  EXPECT_GT(naive1.pss_kb - shared1.pss_kb, weights_kb * 3 / 4) << report;
}

// engine.optimize = "onednn" (the default): the weights the workers run are the
// frozen, prepacked ones optimize_model() made in the supervisor's arena, and
// those are what must be shared.
// Three onednn families of `workers`; the one with the median PSS.
Measured median_of_three(const std::string& model_dir, int workers) {
  std::vector<Measured> runs;
  for (int i = 0; i < 3; ++i) runs.push_back(measure(model_dir, workers, false, "onednn"));
  std::sort(runs.begin(), runs.end(), [](const Measured& a, const Measured& b) { return a.pss_kb < b.pss_kb; });
  return runs[1];
}

// PSS per worker added between 1 and 4 workers, median of three runs each:
// a family's PSS moves by a 4 MB step from run to run whatever its size
// (seen: 1 worker 123.6 or 127.7 MB, 3 workers 134.0 or 138.1 MB).
long pss_per_added_worker(const std::string& model_dir, Measured* one_out = nullptr) {
  const Measured one = median_of_three(model_dir, 1);
  const Measured four = median_of_three(model_dir, 4);
  EXPECT_GT(one.pss_kb, 0);
  EXPECT_GT(four.pss_kb, 0);
  if (one_out) *one_out = one;
  return (four.pss_kb - one.pss_kb) / 3;
}

TEST(PoolMemoryTest, OptimizedPrepackedWeightsAreSharedByEveryWorker) {
  testing::TempDir dir;
  // About 50 MB of weights, and the same network with almost none.
  for (const auto& [name, hidden] : {std::pair<const char*, const char*>{"model", "200000"}, {"small", "1000"}}) {
    auto gen = testing::run_process(
        {COREPOOL_GEN_MODEL_BIN, "--out", dir / name, "--width", "8", "--hidden", hidden}, dir.path());
    ASSERT_EQ(gen.exit_code, 0) << gen.err;
  }
  Measured one;
  const long per_worker = pss_per_added_worker(dir / "model", &one);
  const long weights_kb = one.weight_bytes / 1024;
  ASSERT_GT(weights_kb, 40 * 1024) << "the model should hold about 50 MB of weights";
  EXPECT_GE(one.shared_bytes / 1024, weights_kb * 9 / 10) << "the optimized weights are in the shared arena";
  // What a worker costs whatever its weights (LibTorch's own private pages,
  // its ring, its stack: about 5 MB here, 9-10 % of these weights by itself)
  // is measured with the small model and taken out: what is left is what
  // the weights cost each worker, and shared weights cost it almost nothing.
  const long fixed = pss_per_added_worker(dir / "small");
  std::printf("weights %ld kB, optimized in the arena %ld kB; PSS per added worker %ld kB (%.1f%% of the weights), "
              "with the small model %ld kB: the weights' share %.1f%%\n",
              weights_kb, one.shared_bytes / 1024, per_worker, 100.0 * per_worker / weights_kb, fixed,
              100.0 * (per_worker - fixed) / weights_kb);
  EXPECT_LT(per_worker - fixed, weights_kb / 10);
}

// One worker, batches of 8, never killed as hung here: the idle-purge cases.
ProcessPoolOptions one_worker_of_eight() {
  ProcessPoolOptions o;
  o.optimize = "none";
  o.workers = 1;
  o.max_batch = 8;
  o.hang_timeout_ms = 120000;
  o.log_level = "warn";
  return o;
}

// A worker keeps its freed activations for its next batch (its EngineArena has
// no time-based decay) and gives them back once idle for 100 ms: its PSS falls
// by most of a batch's activations after its last result. Runs on jemalloc
// with corepool's MALLOC_CONF, in a child.
TEST(PoolMemoryTest, AnIdleWorkerGivesItsActivationsBack) {
  if (!testing::jemalloc_usable()) GTEST_SKIP() << COREPOOL_JEMALLOC_LIBRARY << " is not installed";
  const auto r = testing::run_self_test_on_jemalloc("DISABLED_MemoryChild.IdleWorkerPurges", kDefaultMallocConf);
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
}

TEST(DISABLED_MemoryChild, IdleWorkerPurges) {
  ASSERT_EQ(allocator_in_use(), "jemalloc");
  auto model = load_model(COREPOOL_CNN10_MODEL);  // CNN10: tens of MB of activations at batch 8
  // Only full batches run (the worker waits up to 60 s to fill one; the hang
  // deadline is above that): 17 segments are two batches, then the 17th held
  // alone. The worker holding it is busy, not idle, so it cannot purge before
  // the first reading, however late this process gets the cpu.
  ProcessPoolOptions o = one_worker_of_eight();
  o.max_batch_delay_us = 60000000;
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  ProcessPool pool(model, o, [&](SegmentResult&& r) {
    EXPECT_TRUE(r.error.empty()) << r.error;
    std::lock_guard<std::mutex> lock(mu);
    ++done;
    cv.notify_all();
  });
  auto wait_for_results = [&](size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] { return done == n; });
  };
  for (size_t i = 0; i < 17; ++i) pool.submit({1, i, testing::test_segment(model->config.segment_samples(), i)});
  ASSERT_TRUE(wait_for_results(16));
  ASSERT_EQ(pool.worker_pids().size(), 1u);
  const int worker = pool.worker_pids()[0];
  const long busy = pss_kb(worker);
  // The third batch fills and runs; then the worker is idle and purges after
  // 100 ms. The deadline only bounds a failure.
  for (size_t i = 17; i < 24; ++i) pool.submit({1, i, testing::test_segment(model->config.segment_samples(), i)});
  ASSERT_TRUE(wait_for_results(24));
  long idle = busy;
  EXPECT_TRUE(testing::wait_until([&] { return busy - (idle = pss_kb(worker)) > 8 * 1024; }, std::chrono::seconds(30)))
      << "the idle worker kept its activations: PSS " << busy << " kB after its second batch, " << idle
      << " kB 30 s after its last";
  std::printf("worker PSS while it held a batch %ld kB, once idle %ld kB\n", busy, idle);
  // It gives them back itself: it runs no jemalloc background thread (one per
  // worker, woken tens of thousands of times a run, cost a quarter of the
  // throughput), though this process asked for them (kDefaultMallocConf).
  int background_threads = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(worker) + "/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name == "jemalloc_bg_thd") ++background_threads;
  }
  EXPECT_EQ(background_threads, 0) << "the worker runs jemalloc's background thread";
}

// A worker keeps its warm-up's activations for its first calls (given back
// at once, they were faulted in again by the first batch) and gives them back
// in its first idle spell. The worker stalls 3 s after it is ready
// (COREPOOL_TEST_STALL_AFTER_READY_MS), so the first reading is taken before
// its loop can idle, however late this process gets the cpu.
TEST(PoolMemoryTest, AWorkerHoldsItsWarmUpsActivationsUntilItFirstIdles) {
  if (!testing::jemalloc_usable()) GTEST_SKIP() << COREPOOL_JEMALLOC_LIBRARY << " is not installed";
  const auto r = testing::run_self_test_on_jemalloc("DISABLED_MemoryChild.WarmUpKeptUntilIdle", kDefaultMallocConf);
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
}

TEST(DISABLED_MemoryChild, WarmUpKeptUntilIdle) {
  ASSERT_EQ(allocator_in_use(), "jemalloc");
  auto model = load_model(COREPOOL_CNN10_MODEL);  // CNN10: tens of MB of activations at batch 8
  ::setenv("COREPOOL_TEST_STALL_AFTER_READY_MS", "3000", 1);  // read by the worker, after the fork
  const ProcessPoolOptions o = one_worker_of_eight();
  ProcessPool pool(model, o, [](SegmentResult&&) {});
  ASSERT_EQ(pool.worker_pids().size(), 1u);
  const int worker = pool.worker_pids()[0];
  const long warm = pss_kb(worker);
  long idle = warm;
  EXPECT_TRUE(testing::wait_until([&] { return warm - (idle = pss_kb(worker)) > 8 * 1024; }, std::chrono::seconds(30)))
      << "PSS " << warm << " kB right after the warm-up, " << idle << " kB once idle: either the warm-up's "
      << "activations were given back before any call, or never";
  std::printf("worker PSS after its warm-up %ld kB, once idle %ld kB\n", warm, idle);
}

// The child: a pool of $WORKERS over $MODEL, every worker having run a few
// segments, then the PSS of the whole family printed on one line.
TEST(DISABLED_MemoryChild, MeasurePss) {
  const char* model_dir = std::getenv(kModelEnv);
  ASSERT_NE(model_dir, nullptr);
  const int workers = std::atoi(std::getenv(kWorkersEnv));
  auto model = load_model(model_dir);
  const std::string optimize = std::getenv(kOptimizeEnv) ? std::getenv(kOptimizeEnv) : "none";
  long shared_bytes = 0;
  if (optimize != "none") {
    ASSERT_EQ(allocator_in_use(), "jemalloc") << "LD_PRELOAD=libjemalloc.so.2 did not take";
    configure_runtime_threads({1, 1});  // as main() does for process mode: no OpenMP pool at fork
    shared_bytes = static_cast<long>(plan_engine(model, {optimize, 1, 64, true}).optimize.shared_bytes);
  }
  ProcessPoolOptions o;
  o.optimize = optimize;
  o.workers = workers;
  o.max_batch = 1;
  o.naive_weights = std::string(std::getenv(kNaiveEnv)) == "1";
  o.log_level = "warn";
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0, failed = 0;
  ProcessPool pool(model, o, [&](SegmentResult&& r) {
    std::lock_guard<std::mutex> lock(mu);
    ++done;
    failed += r.error.empty() ? 0 : 1;
    cv.notify_all();
  });
  // Three segments per worker, so that each has run forward() and holds its
  // activations (the least-loaded dispatch spreads them).
  const size_t n = 3 * static_cast<size_t>(workers);
  for (size_t i = 0; i < n; ++i) pool.submit({1, i, testing::test_segment(model->config.segment_samples(), i)});
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(120), [&] { return done == n; }));
  }
  pool.wait_idle();
  EXPECT_EQ(failed, 0u);
  long total = pss_kb(::getpid());
  for (int pid : pool.worker_pids()) {
    const long kb = pss_kb(pid);
    ASSERT_GT(kb, 0) << "worker " << pid;
    total += kb;
  }
  std::printf("MEASURED pss_kb=%ld weight_bytes=%ld shared_bytes=%ld\n", total, static_cast<long>(model->weight_bytes),
              shared_bytes);
}

}  // namespace
}  // namespace corepool
