// See allocator_child.h. mallctl is looked up at run time: jemalloc is
// preloaded (engine.allocator), never linked.
#include "worker/host/allocator_child.h"

#include <dlfcn.h>

#include <cstddef>

namespace corepool {

namespace {

using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);

Mallctl jemalloc_mallctl() { return reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl")); }

}  // namespace

bool stop_allocator_background_thread() {
  const Mallctl mallctl = jemalloc_mallctl();
  bool off = false;
  return mallctl && mallctl("background_thread", nullptr, nullptr, &off, sizeof(off)) == 0;
}

bool purge_allocator() {
  const Mallctl mallctl = jemalloc_mallctl();
  // "arena.<MALLCTL_ARENAS_ALL>.purge": every arena (jemalloc's header is not ours to include).
  return mallctl && mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0) == 0;
}

}  // namespace corepool
