// The body of one forked worker process: set up (death signal, signals,
// logger, thread counts, pinning, engine), then serve its channel until told
// to stop or orphaned. Called by the supervisor's ProcessPool in the child
// right after fork(); never returns.
#pragma once

#include <memory>
#include <string>

#include "shm/channel.h"
#include "worker/exit_codes.h"
#include "worker/model/model.h"

namespace corepool {

struct WorkerSetup {
  int slot = 0;                 // the worker's index in the pool
  int cpu = -1;                 // pin to this cpu; -1 = no pinning
  int max_batch = 4;
  int intra_op_threads = 1;     // this worker's own intra-op pool (0 = LibTorch's default)
  int max_batch_delay_us = 0;   // wait this long for a fuller batch when the ring runs dry
  int parent_pid = 0;           // exit when this is no longer our parent
  int completion_eventfd = -1;  // signalled after pushing completions
  std::string log_level = "info";
  std::string naive_model_dir;  // non-empty: load a private copy (naive mode, for benchmarks)
  std::string optimize = "none";  // naive mode: engine.optimize for that private copy
  std::string kernels = "auto";   // ... and engine.kernels
  bool check_model = true;       // run one forward() before ready (the pool's first generation)
  const void* weights = nullptr;  // the shared weight segment, prefaulted at start
  size_t weights_bytes = 0;
};

[[noreturn]] void run_worker_process(const WorkerSetup& setup, shm::ChannelData* channel,
                                     const shm::ChannelLayout& layout,
                                     std::shared_ptr<const LoadedModel> model);

// CLOCK_MONOTONIC in nanoseconds, as the heartbeat uses it.
int64_t monotonic_ns();

}  // namespace corepool
