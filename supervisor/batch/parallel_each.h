// Runs fn(0) .. fn(n - 1) on up to `threads` threads, the calling one among
// them, and returns when every call has returned. Which thread runs which
// index is not fixed: each takes the next index not yet taken. fn must not
// throw (an exception would end the process) and must be safe to run
// concurrently with itself for different indices. The stateful batch driver
// opens (decodes) its next files with it, one per cpu.
#pragma once

#include <cstddef>
#include <functional>

namespace corepool {

void parallel_each(size_t n, int threads, const std::function<void(size_t)>& fn);

}  // namespace corepool
