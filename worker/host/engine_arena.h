// Where an engine thread's activations live on jemalloc: an arena of its own
// that keeps what the thread frees until the thread goes idle, instead of
// giving it back on jemalloc's clock while the thread still runs.
//
// Why: a forward() frees and re-allocates the same activations call after
// call. jemalloc's time-based decay (dirty_decay_ms) cannot tell that reuse
// from memory no longer needed and keeps handing the pages back, and a block
// above 8 MiB (oversize_threshold) goes to an arena that hands it back at once;
// each page given back is a page fault and a zeroed page on the next call.
// Measured with CNN10, one thread, corepool's MALLOC_CONF (corepool-arena-bench,
// bench/RESULTS.md): 6,885 page faults per forward() at batch 8 and 10.4 ms
// per item on jemalloc's arenas, 468 and 8.7 ms in an EngineArena; batch 16
// 20,534 and 11.6 ms against 735 and 8.4 ms. The engine gives the pages back
// itself once it has been idle (purge()).
#pragma once

namespace corepool {

class EngineArena {
 public:
  // Binds the calling thread to an arena without time-based decay (a fresh
  // one, or one an earlier EngineArena released); inactive, and nothing
  // changed, on another allocator or when jemalloc refuses.
  EngineArena();
  // Gives the arena's freed pages back, binds the thread to the arena it had
  // before, and keeps the arena for the next EngineArena (jemalloc cannot
  // delete an arena that may still hold live blocks).
  ~EngineArena();
  EngineArena(const EngineArena&) = delete;
  EngineArena& operator=(const EngineArena&) = delete;

  bool active() const { return index_ >= 0; }
  int index() const { return index_; }
  // Gives every freed page of this arena back to the kernel now. Only this
  // thread's arena: other engines keep their warm pages.
  void purge() const;

 private:
  int index_ = -1;
  unsigned previous_ = 0;
};

}  // namespace corepool
