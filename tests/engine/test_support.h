// Shared helpers of the engine tests: a temp dir that cleans up after itself,
// running a real child process with captured output and rusage, reading files.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace corepool::testing {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/corepool-test-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

struct ProcessResult {
  int exit_code = -1;   // -signal if killed by a signal
  std::string out;
  std::string err;
  long max_rss_kb = 0;  // peak resident set of the child
};

// Polls `done` until it is true or `timeout` passes; returns its last value.
// For events that nothing can notify us of (another process's exit, a /proc
// entry): the poll interval only bounds how late we notice, it orders nothing.
inline bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return done();
    ::usleep(2000);
  }
  return true;
}

// A child started by spawn_process: its pid and where its output goes.
struct Spawned {
  pid_t pid = -1;
  std::string out_path;
  std::string err_path;
};

// Starts argv[0] with the given arguments and extra environment ("K=V"); stdout
// and stderr go to files in scratch_dir, so a chatty child never blocks on a
// full pipe. Finish it with wait_process.
inline Spawned spawn_process(const std::vector<std::string>& argv, const std::string& scratch_dir,
                             const std::vector<std::string>& env = {}) {
  static int counter = 0;
  const std::string base = scratch_dir + "/.child" + std::to_string(++counter);
  Spawned s{-1, base + ".out", base + ".err"};
  s.pid = ::fork();
  if (s.pid < 0) throw std::runtime_error("fork failed");
  if (s.pid == 0) {
    int out = ::open(s.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(s.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    for (const auto& kv : env) ::putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return s;
}

// Waits for the child up to `timeout`, killing it (SIGKILL) if it is still
// running then; exit_code is -1000 on timeout. Collects and removes its output.
inline ProcessResult wait_process(const Spawned& child, std::chrono::milliseconds timeout) {
  int status = 0;
  struct rusage usage {};
  ProcessResult r;
  const bool exited = wait_until([&] { return ::wait4(child.pid, &status, WNOHANG, &usage) == child.pid; }, timeout);
  if (exited) {
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  } else {
    ::kill(child.pid, SIGKILL);
    ::wait4(child.pid, &status, 0, &usage);
    r.exit_code = -1000;
  }
  r.out = read_file(child.out_path);
  r.err = read_file(child.err_path);
  r.max_rss_kb = usage.ru_maxrss;
  std::filesystem::remove(child.out_path);
  std::filesystem::remove(child.err_path);
  return r;
}

// Runs argv to completion (at most 15 minutes).
inline ProcessResult run_process(const std::vector<std::string>& argv, const std::string& scratch_dir) {
  return wait_process(spawn_process(argv, scratch_dir), std::chrono::minutes(15));
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

// True while `pid` exists and is not a zombie.
inline bool process_alive(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// Resident set size of this process in kB (VmRSS).
inline long current_rss_kb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// A deterministic segment of `samples` floats that differs with `index`:
// noise of index-dependent loudness over a tone of index-dependent pitch, so
// that every segment of a test run gives different scores.
inline std::vector<float> test_segment(size_t samples, uint64_t index) {
  std::vector<float> v(samples);
  uint32_t x = static_cast<uint32_t>(index * 2654435761u + 17);
  for (size_t i = 0; i < v.size(); ++i) {
    x = x * 1664525u + 1013904223u;
    const float noise = static_cast<float>((x >> 8) * (1.0 / 16777216.0) - 0.5);
    v[i] = 0.3f * noise * static_cast<float>(index % 5 + 1) + 0.2f * std::sin(0.01f * i * (index % 7 + 1));
  }
  return v;
}

}  // namespace corepool::testing
