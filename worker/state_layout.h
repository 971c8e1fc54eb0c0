// A stateful model's state tensor around its batch dimension ([stateful]
// state_shape, with 0 at the batch): contiguous, it is [outer, B, inner], and
// item i's state (state_floats() floats, as a task carries it) is the `outer`
// runs of `inner` floats at i. Gathered into a batch and scattered back by the
// method's calls (stateful_batch.cc) and the split's sequences (split_infer.cc).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "config/model_config.h"

namespace corepool {

struct StateLayout {
  int64_t outer = 1, inner = 1;
  explicit StateLayout(const StatefulSpec& s) {
    const int bd = s.batch_dim();
    for (int d = 0; d < bd; ++d) outer *= s.state_shape[d];
    for (size_t d = bd + 1; d < s.state_shape.size(); ++d) inner *= s.state_shape[d];
  }
  // Item i's state (at `item`) into the batch of `batch` at `batched`.
  void gather(const float* item, float* batched, int64_t i, int64_t batch) const {
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(batched + (o * batch + i) * inner, item + o * inner, inner * sizeof(float));
    }
  }
  // Item i's state out of the batch, appended to `out`.
  void scatter(const float* batched, int64_t i, int64_t batch, std::vector<float>& out) const {
    for (int64_t o = 0; o < outer; ++o) {
      const float* run = batched + (o * batch + i) * inner;
      out.insert(out.end(), run, run + inner);
    }
  }
};

// state_shape with `batch` at its batch dimension.
inline std::vector<int64_t> batched_state_shape(const StatefulSpec& s, int64_t batch) {
  std::vector<int64_t> shape = s.state_shape;
  shape[s.batch_dim()] = batch;
  return shape;
}

}  // namespace corepool
