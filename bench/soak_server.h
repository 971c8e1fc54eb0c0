// One `corepool serve` process tree for the soak benchmark: started with the
// allocator and MALLOC_CONF under test and its own NOTIFY_SOCKET, ready when
// READY=1 arrives (every worker up), stopped by SIGTERM in the destructor.
// Also the /proc facts the benchmark reads about it: worker pids, which malloc
// each process has mapped, jemalloc's background threads.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace soak {

struct ServeSpec {
  std::string corepool;                    // the binary
  std::string model;                       // model directory
  std::string mode;                        // "thread" | "process"
  std::string allocator;                   // "jemalloc" | "system"
  std::optional<std::string> malloc_conf;  // MALLOC_CONF to set; nullopt: unset (corepool's default applies)
  int workers = 0;                         // 0: usable cpus
  std::string notify_socket;               // path of our NOTIFY_SOCKET (at most 107 bytes)
  std::string log;                         // the server's stderr and stdout go here
};

class ServedCorepool {
 public:
  // Returns once READY=1 arrived; throws std::runtime_error with the tail of
  // the server's log if it exits first or takes over two minutes.
  explicit ServedCorepool(const ServeSpec& spec);
  ~ServedCorepool();  // stop(), if not done
  ServedCorepool(const ServedCorepool&) = delete;
  ServedCorepool& operator=(const ServedCorepool&) = delete;

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  double ready_ms() const { return ready_ms_; }
  // The server's exit, if it has exited ("" while it runs), without waiting.
  std::string exited();
  // SIGTERM and wait; "" after exit code 0, else what happened.
  std::string stop();
  std::string log_tail(int lines) const;
  // The value of NAME in the environment the server was executed with (after
  // corepool's own allocator re-exec); nullopt when unset.
  std::optional<std::string> exec_environment(const std::string& name) const;

 private:
  void bind_notify_socket(const std::string& path);
  void spawn(const ServeSpec& spec);
  void wait_ready();
  std::string describe(int status) const;

  std::string log_;
  int notify_fd_ = -1;
  int pidfd_ = -1;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int port_ = 0;
  double ready_ms_ = 0;
};

// Children of `pid` (every thread's /proc/PID/task/TID/children): the workers.
std::vector<pid_t> children_of(pid_t pid);
// Whether /proc/PID/maps maps a file whose path contains `needle`.
bool maps_file(pid_t pid, const std::string& needle);
// Pss_Anon of /proc/PID/smaps_rollup in kB (-1: unreadable): the process's
// malloc heap and other anonymous memory, copy-on-write pages shared with a
// fork split between the sharers; unlike RSS and PSS, blind to the libraries
// that other programs on the machine map too.
long anon_pss_kb(pid_t pid);
// Threads of `pid` whose name (comm) is `name`.
int threads_named(pid_t pid, const std::string& name);

}  // namespace soak
