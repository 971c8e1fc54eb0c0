// A stand-in for systemd's notify socket in tests: binds an AF_UNIX datagram
// socket in its own temp dir, to be put in a child's NOTIFY_SOCKET, and
// collects what arrives (with the sender's pid, for NotifyAccess=main checks).
// Header-only; used by the Notifier unit tests and the `corepool serve` tests.
// Its socket lives in its own TempDir, removed when it is destroyed.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace corepool::testing {

class NotifyListener {
 public:
  struct Datagram {
    std::string text;  // as sent, e.g. "READY=1\nSTATUS=serving"
    pid_t pid = 0;     // sender (SCM_CREDENTIALS)
  };

  NotifyListener() {
    path_ = dir_ / "notify.sock";  // ~36 bytes: fits sun_path's 108
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd_ < 0) fail("socket");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) fail("bind " + path_);
    const int on = 1;  // the kernel attaches the sender's pid/uid/gid to each datagram
    if (::setsockopt(fd_, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) < 0) fail("SO_PASSCRED");
  }
  ~NotifyListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;

  // The value for NOTIFY_SOCKET.
  const std::string& path() const { return path_; }

  // Every assignment received so far ("READY=1", "STATUS=..."), datagrams split
  // at newlines, in arrival order. Reads what is pending first; never blocks.
  std::vector<std::string> messages() {
    drain();
    return messages_;
  }
  std::vector<Datagram> datagrams() {
    drain();
    return datagrams_;
  }

  // Waits until `done(messages())` holds or `timeout` passes, sleeping in
  // poll() on the socket; returns the predicate's last value.
  bool wait_for(const std::function<bool(const std::vector<std::string>&)>& done,
                std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      drain();
      if (done(messages_)) return true;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count()) + 1) < 0 && errno != EINTR) fail("poll");
    }
  }

  // True once some message equals `m` (e.g. "READY=1").
  static std::function<bool(const std::vector<std::string>&)> has(const std::string& m) {
    return [m](const std::vector<std::string>& v) {
      for (const auto& s : v) {
        if (s == m) return true;
      }
      return false;
    };
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("NotifyListener: " + what + ": " + std::strerror(errno));
  }

  void drain() {
    for (;;) {
      char buf[65536];
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
      iovec iov{buf, sizeof(buf)};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      const ssize_t n = ::recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        fail("recvmsg");
      }
      if (msg.msg_flags & MSG_TRUNC) throw std::runtime_error("NotifyListener: datagram over 64 KiB");
      Datagram d{std::string(buf, static_cast<size_t>(n)), 0};
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
          ucred cred{};
          std::memcpy(&cred, CMSG_DATA(c), sizeof(cred));
          d.pid = cred.pid;
        }
      }
      split_into(d.text, messages_);
      datagrams_.push_back(std::move(d));
    }
  }

  static void split_into(const std::string& text, std::vector<std::string>& out) {
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      if (end > start) out.push_back(text.substr(start, end - start));
      start = end + 1;
    }
  }

  TempDir dir_{"corepool-notify"};
  std::string path_;
  int fd_ = -1;
  std::vector<std::string> messages_;
  std::vector<Datagram> datagrams_;
};

}  // namespace corepool::testing
