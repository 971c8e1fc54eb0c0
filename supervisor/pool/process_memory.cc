#include "supervisor/pool/process_memory.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace corepool {

ProcessMemory read_process_memory(int pid) {
  ProcessMemory m;
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Rss:", 0) == 0) m.rss_kb = std::atol(line.c_str() + 4);
    if (line.rfind("Pss:", 0) == 0) m.pss_kb = std::atol(line.c_str() + 4);
  }
  return m;
}

long read_rss_kb(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
  long size = 0, resident = -1;
  if (!(in >> size >> resident)) return -1;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

std::vector<std::pair<std::string, uint64_t>> allocator_stats() {
  using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);
  // Looked up, not linked: the unit tests and a glibc build have no jemalloc.
  static const auto mallctl = reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl"));
  std::vector<std::pair<std::string, uint64_t>> out;
  if (!mallctl) return out;
  // jemalloc caches its statistics; writing the epoch refreshes them.
  uint64_t epoch = 1;
  size_t len = sizeof(epoch);
  mallctl("epoch", &epoch, &len, &epoch, sizeof(epoch));
  for (const char* name : {"allocated", "active", "resident", "mapped", "retained"}) {
    size_t value = 0;
    len = sizeof(value);
    if (mallctl((std::string("stats.") + name).c_str(), &value, &len, nullptr, 0) == 0) {
      out.emplace_back(name, value);
    }
  }
  return out;
}

}  // namespace corepool
