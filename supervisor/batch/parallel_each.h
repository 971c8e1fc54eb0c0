// Runs fn(0) .. fn(n - 1) on up to `threads` threads, the calling one among
// them, and returns when every call has returned. Which thread runs which
// index is not fixed: each takes the next index not yet taken. fn must not
// throw (an exception would end the process) and must be safe to run
// concurrently with itself for different indices. The stateful batch driver
// opens (decodes) its next files with it, one per cpu, and a CommitGroup
// fsyncs its results with it. The helper threads are kept for the process's
// life, at most kParallelEachHelpers, shared by every caller: a call whose
// helpers are busy with another call's indices runs its own on its thread,
// and never waits for a helper to be free.
#pragma once

#include <cstddef>
#include <functional>

namespace corepool {

constexpr size_t kParallelEachHelpers = 16;

void parallel_each(size_t n, int threads, const std::function<void(size_t)>& fn);

}  // namespace corepool
