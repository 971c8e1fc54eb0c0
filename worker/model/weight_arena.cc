// The arena's first-fit allocator and the c10 router that sends a thread's
// CPU allocations to it. The router stays installed for the life of the
// process: ideep frees through c10::GetAllocator(kCPU)->raw_deallocate(), long
// after the Scope ended, so whoever is the CPU allocator must recognise arena
// pointers whenever they come back.
#include "worker/model/weight_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

#include <c10/core/CPUAllocator.h>

namespace corepool {
namespace {

constexpr size_t kAlign = 64;     // c10's own alignment (gAlignment)
constexpr size_t kPage = 4096;
constexpr size_t kHugePage = 2 << 20;  // x86-64's and aarch64's (4 KiB granule) PMD size

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

thread_local WeightArena* t_active = nullptr;

// Every live arena, for the router's frees (few: one per process-mode model).
std::mutex g_arenas_mu;
std::vector<WeightArena*> g_arenas;
// The address range spanning every live arena, so that the frees of ordinary
// memory (every oneDNN scratch buffer of every forward) never take the lock:
// a pointer outside it cannot be an arena's. An arena's span is published
// before it allocates anything and withdrawn only after its last tensor is
// gone (it outlives its module), so a stale bound never misroutes a free.
std::atomic<uintptr_t> g_lo{UINTPTR_MAX};
std::atomic<uintptr_t> g_hi{0};

void update_span_locked() {
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (const WeightArena* a : g_arenas) {
    const auto base = reinterpret_cast<uintptr_t>(a->base());
    lo = std::min(lo, base);
    hi = std::max(hi, base + a->capacity());
  }
  g_lo.store(lo, std::memory_order_release);
  g_hi.store(hi, std::memory_order_release);
}

WeightArena* arena_of(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  if (at < g_lo.load(std::memory_order_acquire) || at >= g_hi.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lock(g_arenas_mu);
  for (WeightArena* a : g_arenas) {
    if (a->contains(p)) return a;
  }
  return nullptr;
}

class Router final : public c10::Allocator {
 public:
  explicit Router(c10::Allocator* original) : original_(original) {}

  c10::DataPtr allocate(size_t n) const override {
    if (t_active != nullptr && n > 0) {
      if (void* p = t_active->allocate(n)) return {p, p, &Router::delete_arena, c10::Device(c10::DeviceType::CPU)};
    }
    return original_->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Router::raw_delete; }

 private:
  static void delete_arena(void* p) {
    if (WeightArena* a = arena_of(p)) a->free(p);
  }
  // ideep's frees: an arena pointer goes home, anything else to the allocator
  // that made it. A pointer into an arena already destroyed cannot arrive:
  // the arena outlives its module (TorchModule's member order).
  static void raw_delete(void* p) {
    if (p == nullptr) return;
    if (WeightArena* a = arena_of(p)) return a->free(p);
    g_original->raw_deleter()(p);
  }

  c10::Allocator* original_;

 public:
  static c10::Allocator* g_original;
};

c10::Allocator* Router::g_original = nullptr;

void install_router() {
  static std::once_flag once;
  std::call_once(once, [] {
    Router::g_original = c10::GetCPUAllocator();
    static Router router(Router::g_original);
    c10::SetCPUAllocator(&router, /*priority=*/1);
  });
}

// A private mapping of `capacity` bytes starting on a huge-page boundary and
// asking for huge pages (each whole 2 MiB of it; a shorter tail stays in 4 KiB
// pages); nullptr if refused.
void* map_huge(size_t capacity) {
  const size_t reserve = capacity + kHugePage;
  void* raw = ::mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto at = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t base = round_up(at, kHugePage);
  if (base > at) ::munmap(raw, base - at);
  if (const uintptr_t end = at + reserve; end > base + capacity) {
    ::munmap(reinterpret_cast<void*>(base + capacity), end - base - capacity);
  }
  if (::madvise(reinterpret_cast<void*>(base), capacity, MADV_HUGEPAGE) != 0) {
    ::munmap(reinterpret_cast<void*>(base), capacity);
    return nullptr;
  }
  return reinterpret_cast<void*>(base);
}

}  // namespace

// Whether anonymous memory may use transparent huge pages when it asks
// (MADV_HUGEPAGE): the kernel's setting is "always" or "madvise", not "never".
bool anonymous_huge_pages_available() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string setting;
  std::getline(in, setting);
  return !setting.empty() && setting.find("[never]") == std::string::npos;
}

std::shared_ptr<WeightArena> WeightArena::create(size_t capacity) {
  install_router();
  capacity = round_up(std::max<size_t>(capacity, kPage), kPage);
  void* base = nullptr;
  if (anonymous_huge_pages_available()) base = map_huge(capacity);
  const bool huge = base != nullptr;
  // MAP_NORESERVE: the reservation is address space; only written pages count.
  if (!huge) base = ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    throw std::runtime_error("cannot map a weight arena of " + std::to_string(capacity >> 20) +
                             " MiB: " + std::strerror(errno));
  }
  std::shared_ptr<WeightArena> arena(new WeightArena(base, capacity, huge));
  std::lock_guard<std::mutex> lock(g_arenas_mu);
  g_arenas.push_back(arena.get());
  update_span_locked();
  return arena;
}

WeightArena::WeightArena(void* base, size_t capacity, bool huge_pages)
    : base_(base), capacity_(capacity), huge_pages_(huge_pages), owner_(::getpid()) {
  free_.emplace(0, capacity);
}

WeightArena::~WeightArena() {
  {
    std::lock_guard<std::mutex> lock(g_arenas_mu);
    g_arenas.erase(std::remove(g_arenas.begin(), g_arenas.end(), this), g_arenas.end());
    update_span_locked();
  }
  ::munmap(base_, capacity_);
}

WeightArena::Scope::Scope(WeightArena& arena) { t_active = &arena; }
WeightArena::Scope::~Scope() { t_active = nullptr; }

// First fit; nullptr when nothing fits (the router then uses the ordinary
// allocator). Blocks of a page or more start on a page so that their pages
// can be given back whole when freed.
void* WeightArena::allocate(size_t bytes) {
  const size_t align = bytes >= kPage ? kPage : kAlign;
  const size_t size = round_up(bytes, kAlign);
  std::lock_guard<std::mutex> lock(mu_);
  if (sealed_) return nullptr;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const size_t start = round_up(it->first, align);
    const size_t end = it->first + it->second;
    if (start + size > end) continue;
    const size_t head = start - it->first;
    free_.erase(it);
    if (head > 0) free_.emplace(start - head, head);
    if (end > start + size) free_.emplace(start + size, end - start - size);
    live_.emplace(start, size);
    live_bytes_ += size;
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    return static_cast<char*>(base_) + start;
  }
  overflow_bytes_ += bytes;
  return nullptr;
}

// Coalesces with both neighbours, then gives the whole pages of the free run
// back to the kernel (MADV_DONTNEED drops a private mapping's pages;
// MADV_REMOVE punches them out of a shared object), so optimizing's
// temporaries do not stay resident. After seal() nothing is given back: the
// run then stays until munmap.
void WeightArena::free(void* p) {
  if (::getpid() != owner_) return;  // a worker's teardown: the pages are the supervisor's
  std::lock_guard<std::mutex> lock(mu_);
  const size_t offset = static_cast<size_t>(static_cast<char*>(p) - static_cast<char*>(base_));
  auto live = live_.find(offset);
  if (live == live_.end()) return;  // not a block start: never ours to free
  size_t start = offset, end = offset + live->second;
  live_bytes_ -= live->second;
  live_.erase(live);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == end) {
    end += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      free_.erase(prev);
    }
  }
  free_.emplace(start, end - start);
  const size_t page_start = round_up(start, kPage), page_end = end / kPage * kPage;
  if (!sealed_ && page_end > page_start) {
    ::madvise(static_cast<char*>(base_) + page_start, page_end - page_start, huge_pages_ ? MADV_DONTNEED : MADV_REMOVE);
  }
}

int WeightArena::seal() {
  std::lock_guard<std::mutex> lock(mu_);
  if (::mprotect(base_, capacity_, PROT_READ) != 0) return -errno;
  sealed_ = true;
  return 0;
}

void WeightArena::prefault() const {
  if (huge_pages_) return;  // fork copied the private mapping's page-table entries: nothing to fault
#ifdef MADV_POPULATE_READ
  // Only live blocks: a read fault on a hole of a shared mapping would
  // allocate a page of zeros for nothing.
  for (const auto& [p, bytes] : live_blocks()) ::madvise(const_cast<void*>(p), bytes, MADV_POPULATE_READ);
#endif
}

size_t WeightArena::live_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_bytes_;
}

size_t WeightArena::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_bytes_;
}

size_t WeightArena::overflow_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return overflow_bytes_;
}

std::vector<std::pair<const void*, size_t>> WeightArena::live_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<const void*, size_t>> out;
  for (const auto& [offset, bytes] : live_) {
    // madvise wants page-aligned starts: widen each block to its pages.
    const size_t start = offset / kPage * kPage;
    out.emplace_back(static_cast<const char*>(base_) + start, round_up(offset + bytes, kPage) - start);
  }
  return out;
}

}  // namespace corepool
