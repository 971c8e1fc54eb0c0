// Test helpers for `corepool serve` end to end: start the real binary on an
// ephemeral port (or a Unix socket), wait for it to say it serves, talk to it
// with the real curl, stop it with a real signal. Header-only, engine tests.
#pragma once

#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace corepool::testing {

constexpr const char* kCurl = "/usr/bin/curl";

struct HttpAnswer {
  int code = 0;         // 0: curl itself failed (see error)
  std::string body;
  std::string headers;  // the raw response headers, lower-cased
  std::string error;    // curl's stderr
};

// Runs curl with `args` (URL included) and returns what came back.
inline HttpAnswer curl(const TempDir& dir, std::vector<std::string> args) {
  static int counter = 0;
  const std::string base = dir.path() + "/.curl" + std::to_string(++counter);
  std::vector<std::string> argv = {kCurl, "-s", "-S", "--max-time", "120", "-o", base + ".body", "-D",
                                   base + ".hdr", "-w", "%{http_code}"};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult r = run_process(argv, dir.path());
  HttpAnswer a;
  a.code = r.exit_code == 0 ? std::atoi(r.out.c_str()) : 0;
  a.body = read_file(base + ".body");
  a.headers = read_file(base + ".hdr");
  for (char& c : a.headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  a.error = r.err;
  std::filesystem::remove(base + ".body");
  std::filesystem::remove(base + ".hdr");
  return a;
}

// A TCP port that was free a moment ago (for tools that cannot take port 0).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// One running `corepool serve`. The constructor returns once it logged that it
// serves (or exited: then started() is false and log() says why).
class ServeProcess {
 public:
  // `args` go after "serve"; "--listen 127.0.0.1:0" is added unless args set
  // --listen, "--grpc-listen ''" (no gRPC) unless they set --grpc-listen, and
  // "--model" the small default tagger unless they set --model. `prefix` goes
  // before the command (e.g. systemd-socket-activate ...).
  // `wait`: return only once it serves (or died).
  ServeProcess(const TempDir& dir, std::vector<std::string> args, std::vector<std::string> env = {},
               std::vector<std::string> global = {}, std::vector<std::string> prefix = {}, bool wait = true)
      : dir_(dir) {
    std::vector<std::string> argv = prefix;
    argv.insert(argv.end(), {COREPOOL_BIN, "--log-level", "info"});
    argv.insert(argv.end(), global.begin(), global.end());
    argv.push_back("serve");
    if (std::find(args.begin(), args.end(), "--listen") == args.end() && prefix.empty()) {
      argv.insert(argv.end(), {"--listen", "127.0.0.1:0"});
    }
    // gRPC's default address is a fixed port: tests running side by side
    // would collide on it. A test that wants gRPC passes --grpc-listen 127.0.0.1:0.
    if (std::find(args.begin(), args.end(), "--grpc-listen") == args.end()) {
      argv.insert(argv.end(), {"--grpc-listen", ""});
    }
    if (std::find(args.begin(), args.end(), "--model") == args.end()) {
      argv.insert(argv.end(), {"--model", COREPOOL_DEFAULT_MODEL});
    }
    argv.insert(argv.end(), args.begin(), args.end());
    child_ = spawn_process(argv, dir.path(), env);
    if (!wait) return;  // socket activation: it starts on the first connection
    started_ = wait_until([&] { return log().find("serving model") != std::string::npos || !alive(); },
                          std::chrono::seconds(120)) &&
               alive();
    std::smatch m;
    const std::string text = log();
    if (std::regex_search(text, m, std::regex("on http://[^ ]*:([0-9]+)"))) port_ = std::stoi(m[1]);
    if (std::regex_search(text, m, std::regex("gRPC: serving on grpc://[^ ]*:([0-9]+)"))) grpc_port_ = std::stoi(m[1]);
  }
  ~ServeProcess() {
    if (!stopped_) stop(SIGKILL, std::chrono::seconds(10));
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  bool started() const { return started_; }
  int pid() const { return child_.pid; }
  int port() const { return port_; }
  int grpc_port() const { return grpc_port_; }  // 0 without gRPC
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  std::string log() const { return read_file(child_.err_path); }
  bool alive() const { return process_alive(child_.pid); }
  void signal(int sig) const { ::kill(child_.pid, sig); }

  // Sends `sig` and waits for the exit; returns the result (output included).
  ProcessResult stop(int sig = SIGTERM, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    stopped_ = true;
    ::kill(child_.pid, sig);
    return wait_process(child_, timeout);
  }

  // Waits for an exit that an earlier signal() set off (SIGKILLed at
  // destruction if it does not come).
  ProcessResult wait(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    ProcessResult r = wait_process(child_, timeout);
    stopped_ = r.exit_code != -1000;  // wait_process's "timed out"
    return r;
  }

 private:
  const TempDir& dir_;
  Spawned child_;
  bool started_ = false;
  bool stopped_ = false;
  int port_ = 0;
  int grpc_port_ = 0;
};

// The value of an unlabelled sample ("corepool_generation 2") or of a labelled
// one given with its labels ("corepool_queue_depth"), -1 if absent.
inline double metric(const std::string& exposition, const std::string& name_and_labels) {
  const std::string key = "\n" + name_and_labels + " ";
  const size_t at = ("\n" + exposition).find(key);
  if (at == std::string::npos) return -1;
  return std::atof(exposition.c_str() + at + key.size() - 1);
}

}  // namespace corepool::testing
