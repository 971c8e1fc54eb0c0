// Process mode: the supervisor's pool of forked workers, one per usable cpu,
// behind the same Executor seam as thread mode. A libuv loop on its own thread
// owns every ring end on the supervisor side: it dispatches queued segments to
// the least-loaded worker, reads completions when a worker's eventfd fires,
// reaps exits (SIGCHLD), kills hung workers (heartbeat deadline), re-dispatches
// a dead worker's requests and respawns it in the same slot (nginx-style table);
// it also recycles workers past max_requests / max_rss_bytes (drained first)
// and drops the queued segments of a cancelled stream.
// The model's weights live once, read-only, in a shared segment (share_weights)
// created before the first fork; workers inherit views into it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "worker/executor.h"
#include "worker/model.h"

namespace corepool {

struct ProcessPoolOptions {
  int workers = 1;
  int max_batch = 4;
  int max_batch_delay_us = 0;
  int queue_depth = 0;            // segments queued or in flight; 0 = 4 * workers * max_batch
  std::vector<int> cpus;          // pin worker i to cpus[i % size]; empty = no pinning
  int hang_timeout_ms = 10000;    // a busy worker whose heartbeat is older is killed
  int start_timeout_ms = 120000;  // every worker must be ready within this at startup
  int poison_kills = 2;           // a request that killed this many workers fails
  std::string log_level = "info";
  bool naive_weights = false;     // each worker loads its own copy (memory benchmark only)
  int intra_op_threads = 1;       // each worker's own intra-op pool (0 = LibTorch's default)
  // Recycling (gunicorn's max_requests, uWSGI's reload-on-rss): a worker that
  // has run this many segments, or whose resident set exceeds this many bytes,
  // gets no new work, finishes what it holds, exits and is replaced in its
  // slot. One slot at a time. 0 = never.
  uint64_t max_requests = 0;
  uint64_t max_rss_bytes = 0;
};

struct PoolCounters {
  uint64_t restarts = 0;      // workers respawned after an exit
  uint64_t redispatched = 0;  // requests sent again after their worker died
  uint64_t poisoned = 0;      // requests failed as poison input
  uint64_t duplicates = 0;    // late completions dropped
  uint64_t cancelled = 0;     // segments dropped unrun by cancel()
  uint64_t recycled_max_requests = 0;  // workers replaced after max_requests segments
  uint64_t recycled_max_rss = 0;       // workers replaced for a resident set over max_rss_bytes
};

class ProcessPool final : public Executor {
 public:
  // Shares the weights, forks the workers and waits until every one is ready.
  // Throws ModelError if a worker cannot start (boot failure) and
  // std::runtime_error on a system error or the start timeout.
  ProcessPool(std::shared_ptr<const LoadedModel> model, ProcessPoolOptions options, Completion on_complete);
  ~ProcessPool() override;  // drains, stops the workers, frees every segment

  void submit(SegmentTask task) override;
  bool try_submit(std::vector<SegmentTask>& tasks) override;
  void wait_idle() override;
  void cancel(uint64_t stream) override;
  int workers() const override;
  ExecutorStats stats() const override;

  // For tests and benchmarks: current worker pids by slot (0 while respawning),
  // whether every worker is ready, counters, and PSS of supervisor + workers.
  std::vector<int> worker_pids() const;
  bool all_ready() const;
  PoolCounters counters() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace corepool
