// How a stateful model's batch driver cuts one file into lanes: stretches of
// chunks that run in parallel, each its own stream with its own state. A long
// file as one stream has one chunk in flight (the next needs the previous
// state), so it would run at batch 1; as lanes it fills a batch by itself.
// Each lane after the first starts `warmup` chunks early from a fresh state
// and its warm-up scores are discarded: an approximation, off when
// lane_chunks is 0. Pure; used by stateful_batch.cc, tested on its own.
#pragma once

#include <cstdint>
#include <vector>

namespace corepool {

struct Lane {
  int64_t first = 0;  // first chunk it runs (fresh state, zero context)
  int64_t keep = 0;   // first chunk whose score it keeps (first + warm-up)
  int64_t end = 0;    // one past its last chunk
};

// Lanes covering chunks [0, chunks): the kept ranges tile it exactly, in
// order. lane_chunks 0 (or >= chunks) gives one lane {0, 0, chunks}; an empty
// file (chunks 0) gives none. warmup_chunks is clipped at the file's start.
std::vector<Lane> plan_lanes(int64_t chunks, int64_t lane_chunks, int64_t warmup_chunks);

}  // namespace corepool
