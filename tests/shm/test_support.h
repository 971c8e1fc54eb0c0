// Test helpers of the shm/ tests only: a look at /dev/shm for residue, a task
// asleep in a futex, CPU time. Their children share the parent's mappings, so
// they fork (tests/support/process.h, ChildProcess::fork) instead of re-running
// the binary.
#pragma once

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/process.h"
#include "tests/support/wait.h"

namespace corepool::shm::testing {

// The shared helpers (ChildProcess::fork, ExitStatus, wait_until, after, Clock)
// are tests/support's, reachable here as testing::X.
using namespace corepool::testing;

// A request descriptor of the size the supervisor sends: 32 bytes.
struct Descriptor {
  uint64_t seq;
  uint64_t offset;
  uint32_t bytes;
  uint32_t kind;
  uint64_t check;
};
static_assert(sizeof(Descriptor) == 32);

// Names in /dev/shm that belong to `pid`'s segments (corepool.<pid>.*).
inline std::vector<std::string> shm_names_of(pid_t pid, const std::string& dir = "/dev/shm") {
  const std::string prefix = "corepool." + std::to_string(pid) + ".";
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  return names;
}

// True while `pid` is blocked in a futex system call (/proc/<pid>/syscall
// starts with the syscall number when the task sleeps in it).
inline bool blocked_in_futex(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/syscall");
  long number = -1;
  return static_cast<bool>(in >> number) && number == SYS_futex;
}

// CPU time the calling thread has used.
inline std::chrono::nanoseconds thread_cpu_time() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

inline std::chrono::nanoseconds cpu_time_of(const rusage& usage) {
  return std::chrono::seconds(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         std::chrono::microseconds(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

}  // namespace corepool::shm::testing
