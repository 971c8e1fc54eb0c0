// Slab layout arithmetic and the supervisor's slot bookkeeping. Called by the
// supervisor when it sizes a worker's slab and for every request it
// dispatches. Owns only the free list; the slab's bytes belong to a Segment.
#include "shm/slab.h"

#include <stdexcept>
#include <string>

namespace corepool::shm {

SlabLayout make_slab_layout(uint32_t slot_count, uint64_t min_slot_bytes) {
  const uint64_t rounded =
      (min_slot_bytes + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
  if (slot_count == 0 || rounded == 0 || rounded > UINT32_MAX) {
    throw std::invalid_argument("bad slab layout: " + std::to_string(slot_count) +
                                " slots of " + std::to_string(min_slot_bytes) + " bytes");
  }
  return SlabLayout{slot_count, static_cast<uint32_t>(rounded)};
}

SlotPool::SlotPool(uint32_t slot_count) : taken_(slot_count, false) { reset(); }

std::optional<uint32_t> SlotPool::acquire() {
  if (free_.empty()) return std::nullopt;
  const uint32_t slot = free_.back();
  free_.pop_back();
  taken_[slot] = true;
  return slot;
}

void SlotPool::release(uint32_t slot) {
  if (slot >= capacity() || !taken_[slot]) {
    throw std::logic_error("slab slot " + std::to_string(slot) + " released but not in use");
  }
  taken_[slot] = false;
  free_.push_back(slot);
}

void SlotPool::reset() {
  free_.clear();
  // Highest first, so acquire() hands out 0, 1, 2, ... from a fresh pool.
  for (uint32_t slot = capacity(); slot > 0; --slot) free_.push_back(slot - 1);
  taken_.assign(taken_.size(), false);
}

}  // namespace corepool::shm
