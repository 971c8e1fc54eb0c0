// plan_lanes(): lane k keeps chunks [k * L, min((k + 1) * L, chunks)) and
// runs from W chunks before them (from 0 for the first).
#include "supervisor/batch/stream_lanes.h"

#include <algorithm>

namespace corepool {

std::vector<Lane> plan_lanes(int64_t chunks, int64_t lane_chunks, int64_t warmup_chunks) {
  std::vector<Lane> lanes;
  if (chunks <= 0) return lanes;
  if (lane_chunks <= 0 || lane_chunks >= chunks) return {{0, 0, chunks}};
  for (int64_t keep = 0; keep < chunks; keep += lane_chunks) {
    lanes.push_back({std::max<int64_t>(0, keep - warmup_chunks), keep, std::min(chunks, keep + lane_chunks)});
  }
  return lanes;
}

}  // namespace corepool
