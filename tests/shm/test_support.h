// Test helpers for the shm/ tests: a forked child with a deadline (the child
// must share the parent's mappings, so these tests fork instead of re-running
// the binary), and a look at /dev/shm for residue. A ChildProcess that is
// still running when its handle dies is SIGKILLed and reaped: no test leaves a
// child behind or hangs on one.
#pragma once

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace corepool::shm::testing {

using Clock = std::chrono::steady_clock;

inline Clock::time_point after(std::chrono::milliseconds ms) { return Clock::now() + ms; }

struct ChildExit {
  bool timed_out = false;  // still running at the deadline, then SIGKILLed
  int code = -1;           // exit code, or -1 if killed by a signal
  int signal = 0;          // the killing signal, or 0
  rusage usage{};          // the child's CPU time

  std::string describe() const {
    if (timed_out) return "child still running at its deadline (killed)";
    if (signal != 0) return "child killed by signal " + std::to_string(signal);
    return "child exited with code " + std::to_string(code);
  }
};

class ChildProcess {
 public:
  // Forks. The child runs `body` and _exit()s with its result (exceptions
  // exit 100), never returning into GoogleTest. Children report through exit
  // codes: their EXPECTs would go nowhere.
  static ChildProcess spawn(const std::function<int()>& body) {
    std::fflush(nullptr);  // no buffered output printed twice
    const pid_t pid = fork();
    if (pid == 0) {
      int code = 100;
      try {
        code = body();
      } catch (...) {
      }
      _exit(code);
    }
    return ChildProcess(pid);
  }

  ChildProcess(ChildProcess&& other) noexcept : pid_(other.pid_) { other.pid_ = -1; }
  ChildProcess& operator=(ChildProcess&&) = delete;
  ~ChildProcess() {
    if (pid_ > 0) wait_until(Clock::now());
  }

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }

  // Waits for the child's exit until `deadline`; SIGKILLs it then. Reaps it.
  ChildExit wait_until(Clock::time_point deadline) {
    ChildExit result;
    if (pid_ <= 0) return result;
    if (!exits_before(deadline)) {
      result.timed_out = true;
      kill(pid_, SIGKILL);
    }
    int status = 0;
    while (wait4(pid_, &status, 0, &result.usage) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    if (WIFEXITED(status)) result.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
    return result;
  }

  // Sends `sig`, then reaps the child (which must die of it) by `deadline`.
  ChildExit kill_and_wait(int sig, Clock::time_point deadline) {
    kill(pid_, sig);
    return wait_until(deadline);
  }

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}

  // A pidfd turns "the child exited" into an event poll() can wait for.
  bool exits_before(Clock::time_point deadline) {
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
    if (pidfd < 0) return false;
    bool exited = false;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - Clock::now());
      pollfd pfd{pidfd, POLLIN, 0};
      const int rc = poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
      if (rc < 0 && errno == EINTR) continue;
      exited = rc > 0;
      break;
    }
    close(pidfd);
    return exited;
  }

  pid_t pid_;
};

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

// Polls `condition` until it holds or `deadline` passes; the caller asserts
// on the result. For states only the kernel can report (a task asleep).
template <typename Condition>
bool eventually(Condition condition, Clock::time_point deadline) {
  while (!condition()) {
    if (Clock::now() >= deadline) return false;
    sched_yield();
  }
  return true;
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
