// See parallel_each.h.
#include "supervisor/batch/parallel_each.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace corepool {

void parallel_each(size_t n, int threads, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next++; i < n; i = next++) fn(i);
  };
  // No more helpers than indices beyond the caller's first: a thread with
  // nothing to take costs its start for nothing.
  const size_t helpers = std::min<size_t>(threads > 1 ? static_cast<size_t>(threads - 1) : 0, n > 0 ? n - 1 : 0);
  std::vector<std::thread> pool;
  pool.reserve(helpers);
  for (size_t t = 0; t < helpers; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace corepool
