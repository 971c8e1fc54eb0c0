// The child's argv and environment are built before fork(): the benchmark may
// be multi-threaded by then, and the child must not allocate before execve().
// A pidfd makes "exited before READY=1" an event next to the notify socket.
#include "bench/soak_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace soak {
namespace {

using Clock = std::chrono::steady_clock;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Our environment minus the variables the benchmark decides, plus its own.
std::vector<std::string> child_environment(const ServeSpec& spec) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (name == "NOTIFY_SOCKET" || name == "MALLOC_CONF" || name == "COREPOOL_ALLOCATOR_REEXEC") continue;
    env.push_back(entry);
  }
  env.push_back("NOTIFY_SOCKET=" + spec.notify_socket);
  if (spec.malloc_conf) env.push_back("MALLOC_CONF=" + *spec.malloc_conf);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

ServedCorepool::ServedCorepool(const ServeSpec& spec) : log_(spec.log) {
  bind_notify_socket(spec.notify_socket);
  const auto t0 = Clock::now();
  spawn(spec);
  try {
    wait_ready();
  } catch (...) {
    stop();
    ::close(notify_fd_);
    ::close(pidfd_);
    throw;
  }
  ready_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  // Nobody reads STATUS= updates from now on: closed, the server's sends fail
  // at once instead of filling a queue nobody drains.
  ::close(notify_fd_);
  notify_fd_ = -1;
  ::unlink(spec.notify_socket.c_str());
  std::smatch m;
  const std::string text = read_file(log_);
  if (!std::regex_search(text, m, std::regex("on http://[^ ]*:([0-9]+)"))) {
    stop();
    ::close(pidfd_);
    throw std::runtime_error("READY=1 but no listening port in " + log_);
  }
  port_ = std::stoi(m[1]);
}

ServedCorepool::~ServedCorepool() {
  stop();
  if (notify_fd_ >= 0) ::close(notify_fd_);
  if (pidfd_ >= 0) ::close(pidfd_);
}

void ServedCorepool::bind_notify_socket(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) throw std::runtime_error("notify socket path too long: " + path);
  notify_fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ::unlink(path.c_str());
  if (notify_fd_ < 0 || ::bind(notify_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    throw std::runtime_error("cannot bind the notify socket " + path + ": " + std::strerror(errno));
  }
}

void ServedCorepool::spawn(const ServeSpec& spec) {
  std::vector<std::string> args = {spec.corepool, "--log-level", "info", "--allocator", spec.allocator, "serve",
                                   "--mode", spec.mode, "--model", spec.model, "--listen", "127.0.0.1:0",
                                   "--grpc-listen", "", "--workers", std::to_string(spec.workers)};
  std::vector<std::string> env = child_environment(spec);
  std::vector<char*> argv = pointers(args), envp = pointers(env);
  const int log_fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) throw std::runtime_error("cannot open " + log_ + ": " + std::strerror(errno));
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(log_fd);
  if (pid_ < 0) throw std::runtime_error(std::string("fork() failed: ") + std::strerror(errno));
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  if (pidfd_ < 0) throw std::runtime_error(std::string("pidfd_open() failed: ") + std::strerror(errno));
}

void ServedCorepool::wait_ready() {
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) throw std::runtime_error("no READY=1 within 120 s; last lines of " + log_ + ":\n" + log_tail(20));
    pollfd fds[2] = {{notify_fd_, POLLIN, 0}, {pidfd_, POLLIN, 0}};
    const int n = ::poll(fds, 2, static_cast<int>(left));
    if (n < 0 && errno != EINTR) throw std::runtime_error(std::string("poll() failed: ") + std::strerror(errno));
    if (n <= 0) continue;
    if (fds[0].revents & POLLIN) {
      char buf[4096];
      const ssize_t got = ::recv(notify_fd_, buf, sizeof(buf), 0);
      if (got > 0 && std::string(buf, static_cast<size_t>(got)).find("READY=1") != std::string::npos) return;
    }
    if (fds[1].revents & POLLIN) {
      const std::string how = exited();
      throw std::runtime_error("corepool serve stopped before READY=1 (" + (how.empty() ? "exit code 0" : how) +
                               "); last lines of " + log_ + ":\n" + log_tail(20));
    }
  }
}

std::string ServedCorepool::describe(int status) const {
  if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? "" : "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + ::strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

std::string ServedCorepool::exited() {
  if (reaped_) return "exited";
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return "";
  reaped_ = true;
  const std::string how = describe(status);
  return how.empty() ? "exit code 0" : how;
}

std::string ServedCorepool::stop() {
  if (pid_ <= 0 || reaped_) return "";
  ::kill(pid_, SIGTERM);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return describe(status);
}

std::string ServedCorepool::log_tail(int lines) const {
  std::istringstream in(read_file(log_));
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (const auto& line : last) out += "  " + line + "\n";
  return out;
}

std::optional<std::string> ServedCorepool::exec_environment(const std::string& name) const {
  const std::string text = read_file("/proc/" + std::to_string(pid_) + "/environ");
  std::istringstream in(text);
  for (std::string entry; std::getline(in, entry, '\0');) {
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
  }
  return std::nullopt;
}

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "children");
    for (pid_t child; in >> child;) out.push_back(child);
  }
  return out;
}

bool maps_file(pid_t pid, const std::string& needle) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) return true;
  }
  return false;
}

long anon_pss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Pss_Anon:", 0) == 0) return std::atol(line.c_str() + 9);
  }
  return -1;
}

int threads_named(pid_t pid, const std::string& name) {
  int n = 0;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "comm");
    std::string comm;
    std::getline(in, comm);
    n += comm == name;
  }
  return n;
}

}  // namespace soak
