// The one child-process helper of the tests. Two ways in: fork a body that
// shares this process's mappings (ChildProcess::fork, the shm tests), or exec
// a program (spawn_process: the real corepool, curl, or this very test binary
// re-run on one DISABLED_ test, libuv's spawn_helper pattern). One way out:
// wait_for_exit, a pidfd poll with a deadline that SIGKILLs and reaps a child
// still running then. No test leaves a child behind or hangs on one.
#pragma once

#include <fcntl.h>
#include <poll.h>
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
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace corepool::testing {

struct ExitStatus {
  bool timed_out = false;  // still running at the deadline, then SIGKILLed
  int code = -1;           // exit code, or -1 if killed by a signal
  int signal = 0;          // the killing signal, or 0
  rusage usage{};          // the child's CPU time and peak RSS

  std::string describe() const {
    if (timed_out) return "child still running at its deadline (killed)";
    if (signal != 0) return "child killed by signal " + std::to_string(signal);
    return "child exited with code " + std::to_string(code);
  }
};

// Waits for `pid` (our child) to exit until `deadline`, SIGKILLs it then, and
// reaps it. A pidfd turns "the child exited" into an event poll() waits for.
inline ExitStatus wait_for_exit(pid_t pid, Clock::time_point deadline) {
  ExitStatus result;
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  bool exited = false;
  while (pidfd >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd pfd{pidfd, POLLIN, 0};
    const int rc = ::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (rc < 0 && errno == EINTR) continue;
    exited = rc > 0;
    break;
  }
  if (pidfd >= 0) ::close(pidfd);
  if (!exited) {
    result.timed_out = true;
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  while (::wait4(pid, &status, 0, &result.usage) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

// A forked child that runs a body in a copy of this process.
class ChildProcess {
 public:
  // The child runs `body` and _exit()s with its result (exceptions exit 100),
  // never returning into GoogleTest. Children report through exit codes:
  // their EXPECTs would go nowhere.
  static ChildProcess fork(const std::function<int()>& body) {
    std::fflush(nullptr);  // no buffered output printed twice
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 100;
      try {
        code = body();
      } catch (...) {
      }
      ::_exit(code);
    }
    return ChildProcess(pid);
  }

  ChildProcess(ChildProcess&& other) noexcept : pid_(other.pid_) { other.pid_ = -1; }
  ChildProcess& operator=(ChildProcess&&) = delete;
  ~ChildProcess() {
    if (pid_ > 0) wait(Clock::now());
  }

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  // The caller takes over waiting for the child (wait_for_exit).
  pid_t release() {
    const pid_t pid = pid_;
    pid_ = -1;
    return pid;
  }

  // Waits for the exit until `deadline`, SIGKILLs it then; reaps it.
  ExitStatus wait(Clock::time_point deadline) {
    if (pid_ <= 0) return {};
    const ExitStatus result = wait_for_exit(pid_, deadline);
    pid_ = -1;
    return result;
  }

  // Sends `sig`, then reaps the child (which must die of it) by `deadline`.
  ExitStatus kill_and_wait(int sig, Clock::time_point deadline) {
    ::kill(pid_, sig);
    return wait(deadline);
  }

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

// What an exec'd child left: its exit, its output, its peak memory.
struct ProcessResult {
  int exit_code = -1;   // -signal if killed by a signal, -1000 if killed at the deadline
  std::string out;
  std::string err;
  long max_rss_kb = 0;  // peak resident set of the child
};

// An exec'd child started by spawn_process: its pid and where its output goes.
struct Spawned {
  pid_t pid = -1;
  std::string out_path;
  std::string err_path;
};

struct SpawnOptions {
  std::vector<std::string> env;          // "K=V" added to (or replacing in) ours
  std::vector<int> fds;                  // put at fd 3, 4, ... in the child (socket activation)
  std::string own_pid_env;               // if set, NAME=<the child's own pid> (LISTEN_PID)
  std::vector<std::string> drop_env;     // prefixes of our variables the child does not get ("GTEST_")
  int stdin_fd = -1;                     // the child's stdin (a pipe's read end, a file); -1: ours
  int stdout_fd = -1;                    // the child's stdout (a pipe's write end); -1: a file in scratch_dir
};

// Starts argv[0] with its arguments; stdout and stderr go to files in
// scratch_dir, so a chatty child never blocks on a full pipe (unless the test
// hands it a stdout of its own, and then reads it). Finish it with
// wait_process. spawn_process is the common case: only extra environment.
// Everything is prepared before fork(): the child makes only async-signal-safe
// calls until execve, as the parent may have threads (LibTorch's) holding locks.
inline Spawned spawn_process_with(const std::vector<std::string>& argv, const std::string& scratch_dir,
                                  const SpawnOptions& options) {
  static int counter = 0;
  const std::string base = scratch_dir + "/.child" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
  Spawned s{-1, base + ".out", base + ".err"};
  const auto key_of = [](const std::string& kv) { return kv.substr(0, kv.find('=') + 1); };
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    bool keep = true;
    for (const auto& prefix : options.drop_env) keep = keep && kv.rfind(prefix, 0) != 0;
    for (const auto& added : options.env) keep = keep && key_of(kv) != key_of(added);
    if (!options.own_pid_env.empty()) keep = keep && key_of(kv) != options.own_pid_env + "=";
    if (keep) env.push_back(kv);
  }
  env.insert(env.end(), options.env.begin(), options.env.end());
  const size_t pid_slot = env.size();  // the child writes its pid's digits in place
  if (!options.own_pid_env.empty()) env.push_back(options.own_pid_env + "=" + std::string(20, '\0'));
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (auto& kv : env) envp.push_back(kv.data());
  envp.push_back(nullptr);
  std::fflush(nullptr);
  s.pid = ::fork();
  if (s.pid < 0) throw std::runtime_error("fork failed");
  if (s.pid != 0) return s;
  // Child. First lift every fd to pass above 3+n, so that the dup2()s cannot clobber one.
  int high[64];
  const size_t nfds = std::min<size_t>(options.fds.size(), 64);
  for (size_t i = 0; i < nfds; ++i) high[i] = ::fcntl(options.fds[i], F_DUPFD_CLOEXEC, 100);
  const int in_fd = options.stdin_fd >= 0 ? ::fcntl(options.stdin_fd, F_DUPFD_CLOEXEC, 100) : -1;
  const int out_fd = options.stdout_fd >= 0 ? ::fcntl(options.stdout_fd, F_DUPFD_CLOEXEC, 100) : -1;
  for (size_t i = 0; i < nfds; ++i) {
    if (::dup2(high[i], 3 + static_cast<int>(i)) < 0) ::_exit(126);  // dup2 clears FD_CLOEXEC
  }
  const int out = ::open(s.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = ::open(s.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ::dup2(out_fd >= 0 ? out_fd : out, 1);
  ::dup2(err, 2);
  if (in_fd >= 0) ::dup2(in_fd, 0);
  if (!options.own_pid_env.empty()) {
    char digits[20];
    int n = 0;
    for (long pid = ::getpid(); pid > 0; pid /= 10) digits[n++] = static_cast<char>('0' + pid % 10);
    char* at = envp[pid_slot] + options.own_pid_env.size() + 1;
    while (n > 0) *at++ = digits[--n];
  }
  ::execve(args[0], args.data(), envp.data());
  ::_exit(127);
}

inline Spawned spawn_process(const std::vector<std::string>& argv, const std::string& scratch_dir,
                             const std::vector<std::string>& env = {}) {
  return spawn_process_with(argv, scratch_dir, SpawnOptions{env, {}, {}, {}});
}

// Waits for the child up to `timeout`, killing it (SIGKILL) if it is still
// running then. Collects and removes its output.
inline ProcessResult wait_process(const Spawned& child, std::chrono::milliseconds timeout) {
  const ExitStatus status = wait_for_exit(child.pid, after(timeout));
  ProcessResult r;
  r.exit_code = status.timed_out ? -1000 : status.signal != 0 ? -status.signal : status.code;
  r.out = read_file(child.out_path);
  r.err = read_file(child.err_path);
  r.max_rss_kb = status.usage.ru_maxrss;
  std::filesystem::remove(child.out_path);
  std::filesystem::remove(child.err_path);
  return r;
}

// Runs argv to completion (at most 15 minutes).
inline ProcessResult run_process(const std::vector<std::string>& argv, const std::string& scratch_dir) {
  return wait_process(spawn_process(argv, scratch_dir), std::chrono::minutes(15));
}

// A pid that belongs to no process (for now): a child forked and reaped.
inline pid_t dead_pid() {
  ChildProcess child = ChildProcess::fork([] { return 0; });
  const pid_t pid = child.pid();
  child.wait(after(std::chrono::seconds(10)));
  return pid;
}

// This test binary.
inline std::string self_exe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

// The arguments that re-run this binary on one DISABLED_ test ("Suite.Name").
inline std::vector<std::string> self_test_argv(const std::string& disabled_test) {
  return {self_exe(), "--gtest_also_run_disabled_tests", "--gtest_filter=" + disabled_test};
}

// Re-runs this binary on one DISABLED_ test, in `scratch_dir`, and waits for it.
inline ProcessResult run_self_test(const std::string& disabled_test, const std::string& scratch_dir,
                                   std::chrono::milliseconds timeout, const std::vector<std::string>& env = {}) {
  return wait_process(spawn_process(self_test_argv(disabled_test), scratch_dir, env), timeout);
}

// True when a re-run child's gtest output says its one test passed.
inline bool child_test_passed(const ProcessResult& r) {
  return r.exit_code == 0 && r.out.find("[  PASSED  ] 1 test") != std::string::npos;
}

// Child pids of `pid` (from /proc/PID/task/*/children).
inline std::vector<int> child_pids(int pid) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "children");
    for (int child; in >> child;) out.push_back(child);
  }
  return out;
}

// The state letter of `pid` in /proc/PID/stat ('R', 'S', 'T' when stopped...), 0 if gone.
inline char process_state(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : 0;
}

// True while `pid` exists and is not a zombie.
inline bool process_alive(int pid) {
  const char state = process_state(pid);
  return state != 0 && state != 'Z';
}

// Resident set size of this process in kB (VmRSS).
inline long current_rss_kb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

}  // namespace corepool::testing
