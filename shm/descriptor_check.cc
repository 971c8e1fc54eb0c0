// Bounds checks of ring descriptors against a ChannelLayout; see descriptor_check.h.
// All arithmetic is 64-bit on 32-bit fields, so no sum here can wrap.
#include "shm/descriptor_check.h"

#include <algorithm>
#include <cstring>

namespace corepool::shm {
namespace {

constexpr uint32_t kKnownRequestFlags = kRunAlone | kModelInput | kSplitFront | kSplitSequence;

std::string slot_problem(uint32_t slot, const ChannelLayout& layout) {
  if (slot < layout.slab.slot_count) return "";
  return "slab slot " + std::to_string(slot) + " out of range (" + std::to_string(layout.slab.slot_count) +
         " slots)";
}

// Bytes of a slot from result_offset to the timing: where scores or error text go.
uint64_t result_bytes(const ChannelLayout& layout) {
  return layout.timing_offset > layout.result_offset ? layout.timing_offset - layout.result_offset : 0;
}

}  // namespace

std::string request_problem(const RequestDesc& r, const ChannelLayout& layout) {
  if (std::string p = slot_problem(r.slot, layout); !p.empty()) return p;
  const uint64_t bytes = uint64_t{r.samples} * sizeof(float);
  if (bytes > layout.result_offset) {
    return std::to_string(r.samples) + " floats do not fit the slot's input area (" +
           std::to_string(layout.result_offset / sizeof(float)) + " floats)";
  }
  if ((r.flags & ~kKnownRequestFlags) != 0) return "unknown request flags " + std::to_string(r.flags);
  return "";
}

DecodedCompletion decode_completion(const CompletionDesc& c, const char* slab, const ChannelLayout& layout,
                                    uint32_t labels) {
  DecodedCompletion out;
  if (out.problem = slot_problem(c.slot, layout); !out.problem.empty()) return out;
  const uint64_t room = result_bytes(layout);
  const char* slot = slab + layout.slab.offset_of(c.slot);
  const char* result = slot + layout.result_offset;
  if (uint64_t{layout.timing_offset} + sizeof(SlotTiming) <= layout.slab.slot_bytes) {
    std::memcpy(&out.timing, slot + layout.timing_offset, sizeof(SlotTiming));
  }
  if (c.status == 0) {
    if (c.floats > labels) {
      out.problem = std::to_string(c.floats) + " result floats are more than the layout's " + std::to_string(labels);
      return out;
    }
    const uint32_t n = c.floats == 0 ? labels : c.floats;
    if (uint64_t{n} * sizeof(float) > room) {
      out.problem = std::to_string(n) + " scores do not fit the slot's result area";
      return out;
    }
    out.scores.resize(n);
    std::memcpy(out.scores.data(), result, size_t{n} * sizeof(float));
    return out;
  }
  if (c.status != 1) {
    out.problem = "unknown completion status " + std::to_string(c.status);
    return out;
  }
  // The worker writes a terminated text, but a corrupt one may not be: stop at
  // the area's end either way.
  const size_t max_text = static_cast<size_t>(std::min<uint64_t>(room, kErrorTextBytes));
  out.error.assign(result, strnlen(result, max_text));
  return out;
}

}  // namespace corepool::shm
