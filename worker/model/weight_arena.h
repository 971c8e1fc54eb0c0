// Process mode's one copy of the OPTIMIZED weights: a c10 CPU allocator over
// one anonymous mapping. The supervisor turns it on (Scope) while it optimizes
// the model before any fork, so every tensor LibTorch allocates then (the
// folded weights, and oneDNN's prepacked blocks: ideep allocates through
// c10::GetAllocator(kCPU)) lands in the mapping; seal() makes it read-only and
// every forked worker inherits the same physical pages. Owned by the module's
// TorchModule: it must outlive every tensor that points into it.
//
// The mapping is private and in transparent huge pages when the kernel allows
// them (anonymous THP "always" or "madvise"), shared otherwise. Why: fork()
// copies a private mapping's page-table entries, one per 2 MiB page (166 for
// 331 MB), so a worker starts with every weight mapped; a shared mapping
// starts empty in each child (fork copies none of its entries), and mapping
// 80,000 4 KiB pages (MADV_POPULATE_READ) took 18 ms of every respawn. Never
// written after seal(), the private pages stay one physical copy (copy on
// write never happens; a write is a SIGSEGV). Without huge pages, copying
// 80,000 entries at every fork costs more than populating, hence shared.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <sys/types.h>

namespace corepool {

// Whether anonymous memory may use transparent huge pages when it asks for
// them (/sys/kernel/mm/transparent_hugepage/enabled is not "never").
bool anonymous_huge_pages_available();

class WeightArena {
 public:
  // Reserves `capacity` bytes of address space (pages cost memory only once
  // written). Installs the CPU allocator router on first use. Throws
  // std::runtime_error when the mapping cannot be made.
  static std::shared_ptr<WeightArena> create(size_t capacity);
  ~WeightArena();
  WeightArena(const WeightArena&) = delete;
  WeightArena& operator=(const WeightArena&) = delete;

  // While a Scope lives, LibTorch CPU allocations of THIS thread come from the
  // arena (other threads keep the ordinary allocator). Not nestable.
  class Scope {
   public:
    explicit Scope(WeightArena& arena);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };

  // mprotect(PROT_READ) over the whole mapping: a write to a weight page from
  // now on is a SIGSEGV in the writing process alone. 0 or -errno.
  int seal();
  // Maps every live block into this process's page tables in one call per
  // block (a forked worker would otherwise fault once per 4 KiB). Nothing to
  // do in huge pages: the fork copied the entries.
  void prefault() const;
  // Private and in transparent huge pages (see above); false: shared, 4 KiB.
  bool huge_pages() const { return huge_pages_; }

  bool contains(const void* p) const {
    return p >= base_ && p < static_cast<const char*>(base_) + capacity_;
  }
  const void* base() const { return base_; }
  size_t capacity() const { return capacity_; }
  size_t live_bytes() const;     // allocated and not freed
  size_t peak_bytes() const;     // the most ever live at once
  size_t overflow_bytes() const; // asked for while full, served by the ordinary allocator
  std::vector<std::pair<const void*, size_t>> live_blocks() const;

  // Allocator internals, public for the c10 router (weight_arena.cc).
  void* allocate(size_t bytes);
  void free(void* p);

 private:
  WeightArena(void* base, size_t capacity, bool huge_pages);

  void* base_;
  size_t capacity_;
  bool huge_pages_;
  pid_t owner_;  // frees in a forked child are no-ops: the pages are the parent's
  bool sealed_ = false;
  mutable std::mutex mu_;
  std::map<size_t, size_t> free_;  // offset -> bytes, coalesced
  std::map<size_t, size_t> live_;  // offset -> bytes
  size_t live_bytes_ = 0, peak_bytes_ = 0, overflow_bytes_ = 0;
};

}  // namespace corepool
