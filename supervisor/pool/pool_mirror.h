// What other threads may read of the loop thread's worker table: pids,
// readiness, per-slot work, the counters and the first boot error, copied
// here under one mutex by the loop thread as they change. Read by
// ProcessPool's stats()/worker_pids()/all_ready()/counters() and by start(),
// which waits here for every worker to be ready.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "shm/channel.h"
#include "supervisor/pool/pool_options.h"
#include "worker/executor.h"
#include "worker/model/model.h"

namespace corepool::pool {

class PoolMirror {
 public:
  explicit PoolMirror(int workers);

  // Loop thread, as the table changes.
  void worker_started(int slot, int pid, const shm::WorkerControl* control);
  void worker_ready(int slot);
  // `control` is final (the worker is reaped): its counts move into the slot's base.
  void worker_exited(int slot, const shm::WorkerControl& control);
  void boot_failed(const std::string& error);  // keeps the first
  void count(uint64_t PoolCounters::*counter, uint64_t n = 1);

  // Until every worker is ready (or, with `first_only`, one); throws
  // ModelError after a boot failure and std::runtime_error at the timeout.
  void wait_ready(std::chrono::milliseconds timeout, bool first_only = false);

  std::vector<int> pids() const;
  bool all_ready() const;
  PoolCounters counters() const;
  // Everything of ExecutorStats but the queue (outstanding, depth).
  void fill(ExecutorStats& s) const;

 private:
  // A slot's work counters as other threads see them: the sum over its dead
  // workers plus the live worker's own counters in its channel. `live` is set
  // (under mu_) only while the channel belongs to a worker and will not be
  // memset, so fill() never reads memory being re-initialised, and a dead
  // worker's counts move into the base in the same critical section that
  // stops them being read: the sum never goes down.
  struct SlotWork {
    const shm::WorkerControl* live = nullptr;
    uint64_t busy_ns = 0, batches = 0, segments = 0;
  };

  bool all_ready_locked() const;

  mutable std::mutex mu_;
  std::condition_variable ready_cv_;
  std::vector<int> pids_;       // 0 while a slot has no process
  std::vector<bool> ready_;
  std::vector<SlotWork> work_;
  PoolCounters counters_;
  std::string boot_error_;
};

}  // namespace corepool::pool
