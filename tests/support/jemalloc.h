// jemalloc's mallctl and statistics for tests that run a child on jemalloc
// (preloaded, never linked: looked up at run time). Header-only, no LibTorch.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>

namespace corepool::testing {

using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);

// jemalloc's mallctl when jemalloc is in this process, else nullptr.
inline Mallctl find_mallctl() { return reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl")); }

// Pages jemalloc holds dirty (freed, not yet given back) over every arena,
// as its statistics say after an epoch refresh; -1 without mallctl.
inline long jemalloc_dirty_pages() {
  const Mallctl mallctl = find_mallctl();
  uint64_t epoch = 1;
  size_t size = sizeof(epoch);
  if (!mallctl || mallctl("epoch", &epoch, &size, &epoch, sizeof(epoch)) != 0) return -1;
  size_t pages = 0;
  size = sizeof(pages);
  if (mallctl("stats.arenas.4096.pdirty", &pages, &size, nullptr, 0) != 0) return -1;
  return static_cast<long>(pages);
}

}  // namespace corepool::testing
