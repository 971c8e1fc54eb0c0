// inherited_listeners() in a re-executed copy of this binary (libuv's
// spawn_helper pattern): the parent puts real sockets or a file at fd 3 and up
// with LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES, or lets the real
// systemd-socket-activate do it; the DISABLED_ListenFdsChild tests check them.
#include "supervisor/systemd/listen_fds.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/process.h"
#include "tests/support/scratch_dir_test.h"
#include "tests/support/wait.h"

#ifndef COREPOOL_SOCKET_ACTIVATE_BIN
#define COREPOOL_SOCKET_ACTIVATE_BIN "/usr/bin/systemd-socket-activate"
#endif

namespace corepool {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr const char* kChildEnv = "COREPOOL_LISTEN_FDS_CHILD";  // set by the parent tests only

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

int tcp_listener(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) < 0 || ::listen(fd, 16) < 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) < 0) {
    throw std::runtime_error(std::string("tcp listener: ") + std::strerror(errno));
  }
  *port = ntohs(a.sin_port);
  return fd;
}

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

int unix_listener(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_un a = unix_address(path);
  if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) < 0 || ::listen(fd, 16) < 0) {
    throw std::runtime_error("unix listener " + path + ": " + std::strerror(errno));
  }
  return fd;
}

// Waits up to `timeout` for `fd` to become readable.
bool readable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

std::vector<std::string> child_test_args(const std::string& name) {
  return testing::self_test_argv("DISABLED_ListenFdsChild." + name);
}

class ListenFdsTest : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    for (const char* v : {"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"}) ::unsetenv(v);
    ScratchDirTest::SetUp();
  }

  // Runs DISABLED_ListenFdsChild.<name> with `fds` at 3.. and expects it to pass.
  void run_child(const std::string& name, const std::vector<int>& fds, std::vector<std::string> env) {
    env.push_back(std::string(kChildEnv) + "=1");
    env.push_back("LISTEN_FDS=" + std::to_string(fds.size()));
    const testing::Spawned child = testing::spawn_process_with(child_test_args(name), dir_, {env, fds, "LISTEN_PID", {}});
    const testing::ProcessResult r = testing::wait_process(child, 60s);
    EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
  }
};

TEST_F(ListenFdsTest, NotSocketActivatedMeansNoListeners) {
  EXPECT_TRUE(inherited_listeners().empty());
}

// sd_listen_fds() honours LISTEN_FDS only in the process LISTEN_PID names:
// a forked worker or an exec'd helper that inherited the variables takes nothing.
TEST_F(ListenFdsTest, FdsMeantForAnotherProcessAreLeftAlone) {
  ::setenv("LISTEN_PID", std::to_string(::getppid()).c_str(), 1);
  ::setenv("LISTEN_FDS", "1", 1);
  EXPECT_TRUE(inherited_listeners().empty());
  EXPECT_EQ(std::getenv("LISTEN_FDS"), nullptr) << "the variables are unset either way";
}

TEST_F(ListenFdsTest, TakesOverTcpAndUnixListeners) {
  int port = 0;
  const int tcp = tcp_listener(&port);
  const int unix_fd = unix_listener(path("s.sock"));
  run_child("TakesOverTcpAndUnixListeners", {tcp, unix_fd},
            {"LISTEN_FDNAMES=http:unix", "COREPOOL_TEST_PORT=" + std::to_string(port),
             "COREPOOL_TEST_UNIX=" + path("s.sock")});
  ::close(tcp);
  ::close(unix_fd);
}

TEST_F(ListenFdsTest, ARegularFileIsRejectedWithItsFdAndName) {
  const int file = ::open(path("not-a-socket").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(file, 0);
  run_child("RejectsARegularFile", {file}, {"LISTEN_FDNAMES=http"});
  ::close(file);
}

TEST_F(ListenFdsTest, AConnectedSocketIsRejectedAndNoFdIsLeftOpen) {
  int port = 0;
  const int tcp = tcp_listener(&port);
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  run_child("RejectsAConnectedSocket", {tcp, pair[0]}, {"LISTEN_FDNAMES=http:unix"});
  for (int fd : {tcp, pair[0], pair[1]}) ::close(fd);
}

// The real tool: systemd-socket-activate binds two Unix sockets, waits for a
// connection, then execs this binary with them as fds 3 and 4.
TEST_F(ListenFdsTest, SystemdSocketActivateHandsOverItsListeners) {
  ASSERT_EQ(::access(COREPOOL_SOCKET_ACTIVATE_BIN, X_OK), 0)
      << COREPOOL_SOCKET_ACTIVATE_BIN << " is missing: install the systemd package (scripts/install-deps.sh)";
  std::vector<std::string> argv = {COREPOOL_SOCKET_ACTIVATE_BIN, "-l", path("http.sock"), "-l", path("unix.sock"),
                                   "--fdname=http:unix", "-E", std::string(kChildEnv) + "=1"};
  for (const std::string& a : child_test_args("ServesWhatSocketActivateHandsOver")) argv.push_back(a);
  const testing::Spawned tool = testing::spawn_process(argv, dir_);

  // The tool binds and then listens; no event tells us when, so poll connect()
  // with a deadline (the interval only bounds how late we notice).
  const int client = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_un a = unix_address(path("http.sock"));
  int connect_errno = 0;
  const bool connected = testing::wait_until([&] {
    if (::connect(client, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0) {
      connect_errno = 0;
      return true;
    }
    connect_errno = errno;
    return errno != ENOENT && errno != ECONNREFUSED;  // anything else will not heal: stop and report it
  }, 30s) && connect_errno == 0;
  EXPECT_TRUE(connected) << std::strerror(connect_errno);
  // The connection wakes the tool, which execs the child; the child accepts it and answers.
  std::string reply;
  char buf[64];
  while (connected && readable(client, 60s)) {
    const ssize_t n = ::read(client, buf, sizeof(buf));
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(client);
  const testing::ProcessResult r = testing::wait_process(tool, 60s);
  EXPECT_EQ(reply, "accepted on http\n") << r.out << r.err;
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
}

// ---- Run by the tests above in a fresh process, never on their own. ----

class DISABLED_ListenFdsChild : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(std::getenv(kChildEnv), nullptr) << "run only by the ListenFdsTest tests, with fds prepared";
  }
};

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) >= 0; }

void expect_ready_to_serve(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  const int fdfl = ::fcntl(fd, F_GETFD);
  EXPECT_TRUE(fl >= 0 && (fl & O_NONBLOCK)) << "fd " << fd << " is not O_NONBLOCK";
  EXPECT_TRUE(fdfl >= 0 && (fdfl & FD_CLOEXEC)) << "fd " << fd << " is not FD_CLOEXEC";
}

TEST_F(DISABLED_ListenFdsChild, TakesOverTcpAndUnixListeners) {
  const std::vector<ListenFd> fds = inherited_listeners();
  ASSERT_EQ(fds.size(), 2u);
  EXPECT_EQ(fds[0].fd, 3);
  EXPECT_EQ(fds[0].name, "http");
  EXPECT_EQ(fds[1].fd, 4);
  EXPECT_EQ(fds[1].name, "unix");
  for (const ListenFd& l : fds) expect_ready_to_serve(l.fd);
  for (const char* v : {"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"}) {
    EXPECT_EQ(std::getenv(v), nullptr) << v << " must be unset for children";
  }

  sockaddr_in in{};
  socklen_t len = sizeof(in);
  ASSERT_EQ(::getsockname(3, reinterpret_cast<sockaddr*>(&in), &len), 0);
  EXPECT_EQ(std::to_string(ntohs(in.sin_port)), env_or_empty("COREPOOL_TEST_PORT"));
  sockaddr_un un{};
  len = sizeof(un);
  ASSERT_EQ(::getsockname(4, reinterpret_cast<sockaddr*>(&un), &len), 0);
  EXPECT_EQ(std::string(un.sun_path), env_or_empty("COREPOOL_TEST_UNIX"));

  // It really listens: a connection to the port is accepted on fd 3.
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&in), sizeof(in)), 0) << std::strerror(errno);
  ASSERT_TRUE(readable(3, 10s));
  const int conn = ::accept4(3, nullptr, nullptr, SOCK_CLOEXEC);
  EXPECT_GE(conn, 0) << std::strerror(errno);
  for (int fd : {conn, client, 3, 4}) ::close(fd);
}

TEST_F(DISABLED_ListenFdsChild, RejectsARegularFile) {
  try {
    inherited_listeners();
    FAIL() << "a regular file at fd 3 was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "fd 3 (name 'http') from systemd is not a listening stream socket");
  }
  EXPECT_FALSE(fd_open(3)) << "the rejected fd stays open";
}

TEST_F(DISABLED_ListenFdsChild, RejectsAConnectedSocket) {
  try {
    inherited_listeners();
    FAIL() << "a connected (not listening) socket at fd 4 was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "fd 4 (name 'unix') from systemd is not a listening stream socket");
  }
  EXPECT_FALSE(fd_open(3)) << "the good listener must be closed too: the caller got no fds";
  EXPECT_FALSE(fd_open(4));
}

TEST_F(DISABLED_ListenFdsChild, ServesWhatSocketActivateHandsOver) {
  const std::vector<ListenFd> fds = inherited_listeners();
  ASSERT_EQ(fds.size(), 2u);
  EXPECT_EQ(fds[0].name, "http");
  EXPECT_EQ(fds[1].name, "unix");
  for (const ListenFd& l : fds) expect_ready_to_serve(l.fd);
  // The parent's connection, which woke systemd-socket-activate, waits on "http".
  ASSERT_TRUE(readable(fds[0].fd, 30s));
  const int conn = ::accept4(fds[0].fd, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(conn, 0) << std::strerror(errno);
  const std::string reply = "accepted on " + fds[0].name + "\n";
  EXPECT_EQ(::write(conn, reply.data(), reply.size()), static_cast<ssize_t>(reply.size()));
  ::close(conn);
  for (const ListenFd& l : fds) ::close(l.fd);
}

}  // namespace
}  // namespace corepool
