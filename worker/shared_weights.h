// Process mode's one copy of the weights: the supervisor calls share_weights()
// once, before it forks, to move every parameter and buffer of its module into
// a read-only shared segment; forked workers inherit the module and the mapping.
// The SharedWeights owns the segment and must outlive every module bound to it:
// module tensors are non-owning views into its mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "shm/segment.h"
#include "worker/model/model.h"

namespace corepool {

struct SharedWeights {
  shm::Segment segment;     // header + table + data (shm/weight_table.h); read-only
  size_t weight_bytes = 0;  // tensor bytes copied into it
  uint64_t checksum = 0;    // as computed when the segment was filled
  size_t entries = 0;       // parameters + buffers
};

// Copies every parameter and buffer of model.module (recursively) into a new
// segment with memcpy only, seals it read-only, then rebinds each tensor in
// place to a view into it, which frees the heap copy. Runs no LibTorch
// computation and starts no thread: safe before fork(). The LoadedModel is
// const as a handle; its tensors' data is what moves.
// Throws std::runtime_error naming the tensor ("parameter 'b1c1_w': ...") for a
// tensor that cannot be shared (not CPU, not strided, quantized, a lazy
// conjugate, a name longer than shm::kMaxWeightNameLength), or if the segment
// cannot be created or sealed; the module is unchanged when it throws.
SharedWeights share_weights(const LoadedModel& model);

// True when optimize_model() already put the module's weights in a sealed,
// shared WeightArena (process mode's optimized path): there is nothing left to share.
bool weights_already_shared(const LoadedModel& model);

// "" if the segment's header, table and checksum are intact; otherwise what is wrong.
std::string verify_shared_weights(const SharedWeights& weights);

// Rebinds a freshly loaded module with the same structure to the views the
// segment's table describes (e.g. in a process that did not inherit the
// supervisor's module). Verifies the segment (checksum included) and matches
// every tensor by name, kind, dtype and shape before changing anything; throws
// std::runtime_error naming the first mismatch. `segment` must outlive the module.
void bind_to_table(const LoadedModel& model, const shm::Segment& segment);

}  // namespace corepool
