// See engine_arena.h. mallctl is looked up at run time: jemalloc is preloaded
// (engine.allocator), never linked.
#include "worker/host/engine_arena.h"

#include <dlfcn.h>
#include <sys/types.h>

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace corepool {

namespace {

using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);

Mallctl jemalloc_mallctl() { return reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl")); }

// Arenas released by earlier EngineArenas: a reloaded service makes new
// engine threads, and jemalloc allows at most 4095 arenas per process.
std::mutex& free_mutex() {
  static std::mutex mu;
  return mu;
}
std::vector<unsigned>& free_arenas() {
  static std::vector<unsigned> arenas;
  return arenas;
}

bool take_free_arena(unsigned* index) {
  std::lock_guard<std::mutex> lock(free_mutex());
  if (free_arenas().empty()) return false;
  *index = free_arenas().back();
  free_arenas().pop_back();
  return true;
}

bool create_arena(Mallctl mallctl, unsigned* index) {
  size_t size = sizeof(*index);
  if (mallctl("arenas.create", index, &size, nullptr, 0) != 0) return false;
  // No time-based decay: freed pages stay until purge() (engine_arena.h).
  ssize_t never = -1;
  const std::string key = "arena." + std::to_string(*index) + ".dirty_decay_ms";
  return mallctl(key.c_str(), nullptr, nullptr, &never, sizeof(never)) == 0;
}

}  // namespace

EngineArena::EngineArena() {
  const Mallctl mallctl = jemalloc_mallctl();
  if (!mallctl) return;
  unsigned index = 0;
  if (!take_free_arena(&index) && !create_arena(mallctl, &index)) return;
  size_t size = sizeof(previous_);
  if (mallctl("thread.arena", &previous_, &size, &index, sizeof(index)) != 0) {
    std::lock_guard<std::mutex> lock(free_mutex());
    free_arenas().push_back(index);
    return;
  }
  index_ = static_cast<int>(index);
}

EngineArena::~EngineArena() {
  if (!active()) return;
  purge();
  const Mallctl mallctl = jemalloc_mallctl();
  mallctl("thread.arena", nullptr, nullptr, &previous_, sizeof(previous_));
  std::lock_guard<std::mutex> lock(free_mutex());
  free_arenas().push_back(static_cast<unsigned>(index_));
}

void EngineArena::purge() const {
  if (!active()) return;
  const std::string key = "arena." + std::to_string(index_) + ".purge";
  jemalloc_mallctl()(key.c_str(), nullptr, nullptr, nullptr, 0);
}

}  // namespace corepool
