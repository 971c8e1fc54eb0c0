// The two ceilings. Work is shared dynamically: every loop takes the next
// batch from one atomic counter (threads: a std::atomic; processes: one in a
// MAP_SHARED anonymous mapping), so a loop that runs faster does more and the
// clock measures "all work done", not the slowest of N static shares. The
// forward() time of batch k goes to slot k of a table of the same lifetime.
#include "supervisor/bench/bench_ceiling.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "worker/host/allocator_child.h"
#include "worker/host/engine_arena.h"
#include "worker/host/cpus.h"
#include "worker/engine.h"
#include "worker/exit_codes.h"
#include "worker/runtime.h"
#include "worker/shared_weights.h"
#include "worker/model/torch_module.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t batches_of(const CeilingRun& run) { return (run.segments + run.batch - 1) / run.batch; }

// One engine, its features and its warm-up, built where the loop will run
// (the thread or the child), before the barrier.
struct WarmLoop {
  Engine engine;
  torch::Tensor features;
  WarmLoop(const std::shared_ptr<const LoadedModel>& model, const CeilingRun& run) : engine(model) {
    std::vector<const float*> ptrs;
    for (const auto& v : run.inputs) ptrs.push_back(v.data());
    features = engine.features(ptrs);
    // As an engine warms up before its first batch (Engine::warm_up).
    for (int k = 0; k < Engine::kWarmupCalls; ++k) engine.forward(features);
  }
  // Takes batches from `next` until `batches` are taken.
  void run(std::atomic<uint64_t>& next, uint64_t batches, float* times) {
    for (uint64_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < batches;) {
      const auto t = Clock::now();
      engine.forward(features);
      times[k] = std::chrono::duration<float, std::milli>(Clock::now() - t).count();
    }
  }
};

// Threads wait here until the main thread has started the clock.
class Barrier {
 public:
  void arrive() {
    std::unique_lock<std::mutex> lock(mu_);
    ++ready_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return go_; });
  }
  void wait_for(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return ready_ >= n; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    go_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int ready_ = 0;
  bool go_ = false;
};

void write_byte(int fd) {
  const char c = 1;
  if (::write(fd, &c, 1) != 1) throw std::runtime_error("bench: write() to a ceiling process pipe failed");
}

void read_byte(int fd, const char* what) {
  char c;
  if (::read(fd, &c, 1) != 1) throw std::runtime_error(std::string("bench: a ceiling process died ") + what);
}

// The counter and the time table, shared by the parent and every child.
struct SharedWork {
  std::atomic<uint64_t> next{0};
  float times[1];  // batches_of(run) entries follow
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the counter must work across processes");

}  // namespace

CeilingResult ceiling_threads(const std::shared_ptr<const LoadedModel>& model, const CeilingRun& run,
                              ResourceProbe& probe) {
  const uint64_t batches = batches_of(run);
  std::vector<float> times(batches);
  std::vector<std::exception_ptr> errors(run.workers);
  std::atomic<uint64_t> next{0};
  Barrier barrier;
  std::vector<std::thread> pool;
  for (int i = 0; i < run.workers; ++i) {
    pool.emplace_back([&, i] {
      if (!run.cpus.empty()) pin_current_thread(run.cpus[i % run.cpus.size()]);
      const EngineArena arena;  // as an engine thread allocates (engine_arena.h)
      std::unique_ptr<WarmLoop> loop;
      try {
        c10::InferenceMode guard;  // as Engine::infer runs: the input is an inference tensor too
        loop = std::make_unique<WarmLoop>(model, run);
      } catch (...) {
        errors[i] = std::current_exception();
      }
      barrier.arrive();  // even after a failure: the others must not wait forever
      if (!loop) return;
      c10::InferenceMode guard;
      try {
        loop->run(next, batches, times.data());
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  barrier.wait_for(run.workers);
  probe.mark_start();
  barrier.release();
  for (auto& t : pool) t.join();
  probe.mark_end();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return {batches * run.batch, std::vector<double>(times.begin(), times.end())};
}

namespace {

// A pipe barrier starts the clock once every child has built its engine and
// warmed up; each child reports the end of its loop through the same pipe and
// then waits, so that its CPU counters are read while it is alive and process
// exit stays out of the measurement.
CeilingResult fork_ceiling_processes(const std::shared_ptr<const LoadedModel>& model, const CeilingRun& run,
                                     ResourceProbe& probe) {
  // As ProcessPool::start(): an optimized model already lives in its sealed
  // arena; a model as loaded gets one shared read-only copy before any fork.
  std::unique_ptr<SharedWeights> weights;
  if (!weights_already_shared(*model)) weights = std::make_unique<SharedWeights>(share_weights(*model));
  const uint64_t batches = batches_of(run);
  const size_t bytes = sizeof(SharedWork) + sizeof(float) * batches;
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::runtime_error("bench: mmap of the shared work counter failed");
  auto* work = new (mem) SharedWork();
  int ready[2], go[2];
  if (::pipe(ready) != 0 || ::pipe(go) != 0) throw std::runtime_error("bench: pipe() failed");
  std::vector<pid_t> children;
  for (int i = 0; i < run.workers; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      // What a worker does before its first request (worker_process.cc):
      // no jemalloc background thread (fork stopped it), its engine arena.
      configure_runtime_threads({run.intra_op, 1});
      if (!run.cpus.empty()) pin_current_thread(run.cpus[i % run.cpus.size()]);
      const EngineArena arena;
      if (weights) ::madvise(weights->segment.data(), weights->segment.size(), MADV_POPULATE_READ);
      if (const auto& arena = torch_of(*model).arena) arena->prefault();
      c10::InferenceMode guard;
      WarmLoop loop(model, run);
      // A child that lost its pipe to the parent has nothing to report: any
      // non-zero status fails the point in the parent.
      char c = 1;
      if (::write(ready[1], &c, 1) != 1 || ::read(go[0], &c, 1) != 1) ::_exit(exit_status(ExitCode::kInternal));
      loop.run(work->next, batches, work->times);
      if (::write(ready[1], &c, 1) != 1 || ::read(go[0], &c, 1) != 1) ::_exit(exit_status(ExitCode::kInternal));
      ::_exit(exit_status(ExitCode::kOk));
    }
    children.push_back(pid);
  }
  for (int i = 0; i < run.workers; ++i) read_byte(ready[0], "while starting");
  probe.mark_start();
  for (int i = 0; i < run.workers; ++i) write_byte(go[1]);
  for (int i = 0; i < run.workers; ++i) read_byte(ready[0], "while running");
  probe.mark_end();
  for (int i = 0; i < run.workers; ++i) write_byte(go[1]);
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("bench: a ceiling process failed");
  }
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
  CeilingResult result{batches * run.batch, std::vector<double>(work->times, work->times + batches)};
  ::munmap(mem, bytes);
  return result;
}

}  // namespace

CeilingResult ceiling_processes(const std::shared_ptr<const LoadedModel>& model, const CeilingRun& run,
                                ResourceProbe& probe) {
  // The children fork from a thread of their own, as process mode's workers
  // fork from the pool's loop thread: a child runs on a copy of the forking
  // thread, and the caller's thread has run the calibration forwards.
  CeilingResult result;
  std::exception_ptr error;
  std::thread forker([&] {
    try {
      result = fork_ceiling_processes(model, run, probe);
    } catch (...) {
      error = std::current_exception();
    }
  });
  forker.join();
  if (error) std::rethrow_exception(error);
  return result;
}

}  // namespace corepool
