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

#include "shm/channel.h"
#include "supervisor/pool/pool_options.h"
#include "worker/executor.h"
#include "worker/model/model.h"

namespace corepool {

// One worker's channel for `config` and batches of up to `max_batch`: rings,
// slab and where a slot's parts are. Its slab's slot count bounds a worker's
// batch (ChannelLayout::batch_limit()); with the default max_batch it is the
// model's largest, process mode's limit when the batch is planned.
shm::ChannelLayout channel_layout(const ModelConfig& config, uint32_t max_batch = shm::kMaxBatch);

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
  // Its completions run inside a pass of the supervisor's loop, which
  // dispatches what they submit before the pass ends (SupervisorLoop::try_submit).
  bool submits_from_completions() const override { return true; }

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
