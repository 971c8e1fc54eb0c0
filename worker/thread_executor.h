// Thread mode: N engine threads inside this process, each pinned to one usable
// cpu, all sharing ONE set of weights (one LoadedModel). A bounded queue feeds
// them; each thread takes up to max_batch segments per forward(). Tasks a
// completion submits on an engine's own thread go to that engine's own queue,
// which it takes first: a stateful model's lanes keep to the engine whose call
// they were in. Owned by the command that runs it; the destructor drains the
// queues and joins the threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "worker/host/engine_arena.h"
#include "worker/executor.h"
#include "worker/model/model.h"

namespace corepool {

class Engine;

struct ThreadExecutorOptions {
  int threads = 1;
  int max_batch = 4;
  int queue_depth = 0;     // segments queued or running; 0 = 4 * threads * max_batch
  std::vector<int> cpus;   // pin thread i to cpus[i % size]; empty = no pinning
};

class ThreadExecutor final : public Executor {
 public:
  // Starts the threads; each builds its Engine and checks the model's output
  // shape on a full batch (max_batch) first. Throws ModelError if that fails.
  ThreadExecutor(std::shared_ptr<const LoadedModel> model, ThreadExecutorOptions options,
                 Completion on_complete);
  ~ThreadExecutor() override;

  void submit(SegmentTask task) override;
  bool try_submit(std::vector<SegmentTask>& tasks) override;
  void wait_idle() override;
  void cancel(uint64_t stream) override;
  int workers() const override { return options_.threads; }
  ExecutorStats stats() const override;
  bool submits_from_completions() const override { return true; }

  // Segments per forward() so far, for the batch-size histogram in bench output.
  double mean_batch() const;
  // Engine threads waiting for work now (an idle engine leaves the others their share).
  size_t idle_engines() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Queued {
    SegmentTask task;
    Clock::time_point at;  // when it was submitted: its queue time ends when an engine takes it
  };

  void run(int slot);
  // Up to max_batch tasks and, per task, the nanoseconds it waited in the queue.
  std::vector<SegmentTask> take_batch(int slot, std::vector<uint64_t>& queue_ns, const EngineArena& arena);
  bool has_work(int slot) const;  // requires mu_
  void finish_batch(size_t n);
  void end_running();  // the batch take_batch() gave this thread is done
  void reject_misshapen(std::vector<SegmentTask>& batch, std::vector<uint64_t>& queue_ns);
  void run_batch(Engine& engine, int slot, std::vector<SegmentTask>& batch, const std::vector<uint64_t>& queue_ns);
  void account(int slot, size_t segments, double seconds);

  std::shared_ptr<const LoadedModel> model_;
  ThreadExecutorOptions options_;
  Completion on_complete_;

  mutable std::mutex mu_;
  std::condition_variable work_ready_;   // queue non-empty or stopping
  std::condition_variable space_ready_;  // in_flight_ dropped below depth
  std::condition_variable idle_;         // in_flight_ reached 0
  std::deque<Queued> queue_;
  std::vector<std::deque<Queued>> own_;  // per engine: what its completions submitted (submit_own())
  size_t in_flight_ = 0;                 // queued (either kind) + running
  size_t waiting_ = 0;                   // engine threads waiting in take_batch() for work
  size_t running_ = 0;                   // engine threads holding a batch (taken, not yet finished)
  size_t depth_ = 0;
  bool stopping_ = false;
  uint64_t batches_ = 0;                 // forward() calls
  uint64_t segments_ = 0;                // segments they ran
  uint64_t cancelled_ = 0;               // segments dropped unrun by cancel()
  std::vector<double> busy_seconds_;     // per engine thread: features + forward()

  std::exception_ptr startup_error_;
  int started_ = 0;
  std::condition_variable started_cv_;
  std::vector<std::thread> threads_;
};

}  // namespace corepool
