// What a ProcessPool is asked for (ProcessPoolOptions) and what it counts
// (PoolCounters): plain values, in their own header so that the pool's parts
// (worker table, dispatcher, mirror) read them without including the facade.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
  std::string optimize = "none";  // naive workers optimize their own copy so (worker/optimize/optimize.h)
  std::string kernels = "auto";   // ... on this engine.kernels path
  int intra_op_threads = 1;       // each worker's own intra-op pool (0 = LibTorch's default)
  // Recycling (gunicorn's max_requests, uWSGI's reload-on-rss): a worker that
  // has run this many segments, or whose resident set exceeds this many bytes,
  // gets no new work, finishes what it holds, exits and is replaced in its
  // slot. One slot at a time. 0 = never.
  uint64_t max_requests = 0;
  uint64_t max_rss_bytes = 0;
  // Crash-loop back-off: a slot whose workers keep dying before they are ready
  // waits respawn_backoff_ms << (deaths - 1), at most respawn_backoff_max_ms,
  // and is given up after 10 tries. Tests shorten both; the schedule is the same.
  int respawn_backoff_ms = 100;
  int respawn_backoff_max_ms = 10000;
  // The constructor returns once the first worker is ready instead of every
  // one (`corepool batch`: the others take their share of the queue as they
  // come up). A service reports READY=1 only with every worker up: false.
  bool start_on_first_ready = false;
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

}  // namespace corepool
