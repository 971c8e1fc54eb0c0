// PoolMirror: the loop thread's worker table as other threads may read it
// (see pool_mirror.h). Every member is under mu_; the live counters in a
// channel are read with relaxed loads (the worker writes them on its own).
#include "supervisor/pool/pool_mirror.h"

#include <algorithm>
#include <stdexcept>

namespace corepool::pool {

PoolMirror::PoolMirror(int workers) : pids_(workers, 0), ready_(workers, false), work_(workers) {}

void PoolMirror::worker_started(int slot, int pid, const shm::WorkerControl* control) {
  std::lock_guard<std::mutex> lock(mu_);
  pids_[slot] = pid;
  ready_[slot] = false;
  work_[slot].live = control;
}

void PoolMirror::worker_ready(int slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_[slot] = true;
  }
  ready_cv_.notify_all();
}

void PoolMirror::worker_exited(int slot, const shm::WorkerControl& control) {
  std::lock_guard<std::mutex> lock(mu_);
  pids_[slot] = 0;
  ready_[slot] = false;
  SlotWork& work = work_[slot];
  work.busy_ns += control.busy_ns.load(std::memory_order_relaxed);
  work.batches += control.batches.load(std::memory_order_relaxed);
  work.segments += control.segments.load(std::memory_order_relaxed);
  work.live = nullptr;
}

void PoolMirror::boot_failed(const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (boot_error_.empty()) boot_error_ = error;
  }
  ready_cv_.notify_all();
}

void PoolMirror::count(uint64_t PoolCounters::*counter, uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_.*counter += n;
}

void PoolMirror::wait_ready(std::chrono::milliseconds timeout, bool first_only) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto ready = [this, first_only] {
    return first_only ? std::any_of(ready_.begin(), ready_.end(), [](bool r) { return r; }) : all_ready_locked();
  };
  const bool done = ready_cv_.wait_for(lock, timeout, [&] { return !boot_error_.empty() || ready(); });
  if (!boot_error_.empty()) throw ModelError(boot_error_);
  if (!done) throw std::runtime_error("workers not ready after " + std::to_string(timeout.count()) + " ms");
}

bool PoolMirror::all_ready_locked() const {
  return std::all_of(ready_.begin(), ready_.end(), [](bool r) { return r; });
}

std::vector<int> PoolMirror::pids() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pids_;
}

bool PoolMirror::all_ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return all_ready_locked();
}

PoolCounters PoolMirror::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void PoolMirror::fill(ExecutorStats& s) const {
  std::lock_guard<std::mutex> lock(mu_);
  s.pids = pids_;
  s.all_ready = all_ready_locked();
  s.restarts = counters_.restarts;
  s.redispatched = counters_.redispatched;
  s.poisoned = counters_.poisoned;
  s.cancelled = counters_.cancelled;
  s.recycled_max_requests = counters_.recycled_max_requests;
  s.recycled_max_rss = counters_.recycled_max_rss;
  for (const SlotWork& work : work_) {
    uint64_t busy_ns = work.busy_ns;
    if (work.live) {
      busy_ns += work.live->busy_ns.load(std::memory_order_relaxed);
      s.batches += work.live->batches.load(std::memory_order_relaxed);
      s.segments += work.live->segments.load(std::memory_order_relaxed);
    }
    s.batches += work.batches;
    s.segments += work.segments;
    s.busy_seconds.push_back(static_cast<double>(busy_ns) / 1e9);
  }
}

}  // namespace corepool::pool
