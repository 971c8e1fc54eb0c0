// Checks on the descriptors a process pops from a ring. The process at the
// other end may be corrupted (a stray write in a worker, a bug), so every
// field read from shared memory is untrusted: a slot index, a length, a flag
// or a status is checked against the channel's layout before it becomes an
// address. Used by the worker (requests) and the supervisor (completions).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shm/channel.h"

namespace corepool::shm {

// "" when `r` may be served: its slot is in the slab, its floats fit the
// slot's input area, its flags are known ones. Else what is wrong, e.g.
// "slab slot 70 out of range (64 slots)".
std::string request_problem(const RequestDesc& r, const ChannelLayout& layout);

// A completion read back from its slot: the scores (status 0) or the worker's
// error text (status 1), or, when the descriptor itself is corrupt, only the
// problem. Nothing past the slot's result area is read.
struct DecodedCompletion {
  std::string problem;        // non-empty: corrupt descriptor, ignore the rest
  std::vector<float> scores;  // `labels` floats, or the completion's `floats` when set (at most `labels`)
  std::string error;          // the worker's error text (at most kErrorTextBytes)
  SlotTiming timing;          // as the worker wrote it (numbers only: the reader checks what it uses)
};

// `slab` is the start of the channel's slab in this process's mapping.
DecodedCompletion decode_completion(const CompletionDesc& c, const char* slab, const ChannelLayout& layout,
                                    uint32_t labels);

}  // namespace corepool::shm
