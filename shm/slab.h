// A slab: the per-worker payload area of a Segment, cut into equal slots that
// hold samples, features and results; ring descriptors name a slot by index
// or offset. SlabLayout is the plain shared description (any process may read
// it); SlotPool is the supervisor's private record of which slots are in use.
// The supervisor alone acquires and releases; a worker only reads and writes.
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

namespace corepool::shm {

inline constexpr uint32_t kSlotAlignment = 64;  // a slot never shares a cache line

// Where slot i lives, relative to the slab's start. Offsets, not pointers:
// every process adds them to its own mapping's address.
struct SlabLayout {
  uint32_t slot_count;
  uint32_t slot_bytes;  // a multiple of kSlotAlignment

  uint64_t offset_of(uint32_t slot) const { return uint64_t{slot} * slot_bytes; }
  uint64_t total_bytes() const { return uint64_t{slot_count} * slot_bytes; }
};
static_assert(std::is_trivially_copyable_v<SlabLayout> && std::is_standard_layout_v<SlabLayout>,
              "SlabLayout is shared between processes as plain bytes");

// A layout of `slot_count` slots of at least `min_slot_bytes` each, rounded
// up to kSlotAlignment. Throws std::invalid_argument when a slot would exceed
// 4 GiB or be empty, or slot_count is 0.
SlabLayout make_slab_layout(uint32_t slot_count, uint64_t min_slot_bytes);

// Which slots of one slab are handed out. Process-local, owned by the
// supervisor: reset() takes back every slot when the worker using them dies.
class SlotPool {
 public:
  explicit SlotPool(uint32_t slot_count);

  // A free slot, or nullopt when all are in use. Recently released slots come
  // back first (their cache lines are still warm).
  std::optional<uint32_t> acquire();
  // Returns `slot`. Throws std::logic_error if it is not in use: a double
  // release would let two requests share one slot.
  void release(uint32_t slot);
  // Returns every slot, as if all in-flight requests had been released.
  void reset();

  uint32_t in_use() const { return capacity() - static_cast<uint32_t>(free_.size()); }
  uint32_t capacity() const { return static_cast<uint32_t>(taken_.size()); }

 private:
  std::vector<uint32_t> free_;  // stack of free slots; acquire() pops the back
  std::vector<bool> taken_;     // taken_[i] == slot i is not in free_
};

}  // namespace corepool::shm
