// What a process costs in memory, read from /proc: resident set and
// proportional set (shared pages split between the processes mapping them),
// and the allocator's own view of the heap. Used by /metrics and the memory
// benchmark; each call reads the files afresh (a few hundred microseconds).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace corepool {

struct ProcessMemory {
  long rss_kb = -1;  // -1: unreadable (the process is gone, or no permission)
  long pss_kb = -1;
};

// From /proc/PID/smaps_rollup.
ProcessMemory read_process_memory(int pid);

// Resident set only, from /proc/PID/statm: a few microseconds, cheap enough
// for the pool to check every worker ten times a second. -1 when unreadable.
long read_rss_kb(int pid);

// jemalloc's counters in bytes ("allocated", "active", "resident", "mapped",
// "retained"), refreshed through its "epoch" control. Empty when the process
// does not run on jemalloc (mallctl is looked up at run time).
std::vector<std::pair<std::string, uint64_t>> allocator_stats();

}  // namespace corepool
