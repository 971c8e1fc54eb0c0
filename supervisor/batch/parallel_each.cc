// See parallel_each.h. The helpers are threads kept for the process's life:
// the stateful driver calls parallel_each for every window of files and the
// committer for every group of results, and a thread started and ended each
// time cost its stack's page faults and the madvise that gives the stack
// back, whose TLB shootdown interrupts the engines on the other cpus.
#include "supervisor/batch/parallel_each.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace corepool {
namespace {

struct Job {
  std::atomic<size_t> next{0};
  size_t n = 0;
  const std::function<void(size_t)>* fn = nullptr;
  int running = 0;  // helpers inside run(); HelperPool::mu_ guards it

  void run() {
    for (size_t i = next++; i < n; i = next++) (*fn)(i);
  }
};

class HelperPool {
 public:
  // Never destroyed: idle helpers wait on it until the process exits.
  static HelperPool& instance() {
    static HelperPool* pool = new HelperPool;
    return *pool;
  }

  // Asks `helpers` threads to join the job; any that are busy elsewhere may
  // never come (finish() withdraws the ask).
  void ask(Job& job, size_t helpers) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t h = 0; h < helpers; ++h) asks_.push_back(&job);
    while (idle_ + starting_ < asks_.size() && threads_ < kParallelEachHelpers) {
      ++threads_;
      ++starting_;
      std::thread([this] { serve(); }).detach();
    }
    // One wake-up an ask: waking every idle helper for a call that asks one
    // would run them all only to find nothing.
    for (size_t h = 0; h < helpers; ++h) work_cv_.notify_one();
  }

  // Withdraws the asks no helper took, then waits for those that did.
  void finish(Job& job) {
    std::unique_lock<std::mutex> lock(mu_);
    asks_.erase(std::remove(asks_.begin(), asks_.end(), &job), asks_.end());
    done_cv_.wait(lock, [&] { return job.running == 0; });
  }

 private:
  void serve() {
    std::unique_lock<std::mutex> lock(mu_);
    --starting_;
    for (;;) {
      ++idle_;
      work_cv_.wait(lock, [&] { return !asks_.empty(); });
      --idle_;
      Job* job = asks_.front();
      asks_.pop_front();
      ++job->running;
      lock.unlock();
      job->run();
      lock.lock();
      if (--job->running == 0) done_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Job*> asks_;
  size_t threads_ = 0, idle_ = 0, starting_ = 0;
};

}  // namespace

void parallel_each(size_t n, int threads, const std::function<void(size_t)>& fn) {
  Job job;
  job.n = n;
  job.fn = &fn;
  // No more helpers than indices beyond the caller's first: a helper with
  // nothing to take costs its wake-up for nothing.
  const size_t helpers = std::min<size_t>(threads > 1 ? static_cast<size_t>(threads - 1) : 0, n > 0 ? n - 1 : 0);
  if (helpers == 0) {
    job.run();
    return;
  }
  HelperPool& pool = HelperPool::instance();
  pool.ask(job, helpers);
  job.run();
  pool.finish(job);
}

}  // namespace corepool
