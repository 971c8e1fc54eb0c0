// Socket activation: validates and prepares the listening fds systemd passed.
// See listen_fds.h.
#include "supervisor/systemd/listen_fds.h"

#include <fcntl.h>
#include <systemd/sd-daemon.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace corepool {
namespace {

// Takes ownership of the char** that sd_listen_fds_with_names() allocates.
struct NameList {
  char** names = nullptr;
  ~NameList() {
    if (!names) return;
    for (char** n = names; *n; ++n) std::free(*n);
    std::free(names);
  }
};

std::string describe(int fd, const std::string& name) {
  return "fd " + std::to_string(fd) + " (name '" + name + "') from systemd";
}

// Empty on success, else why `fd` cannot be served on.
std::string prepare(int fd, const std::string& name) {
  const int r = sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, /*listening=*/1);
  if (r < 0) return describe(fd, name) + " cannot be inspected: " + std::strerror(-r);
  if (r == 0) return describe(fd, name) + " is not a listening stream socket";
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    return describe(fd, name) + ": cannot set O_NONBLOCK: " + std::strerror(errno);
  }
  const int fdfl = ::fcntl(fd, F_GETFD);
  if (fdfl < 0 || ::fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC) < 0) {
    return describe(fd, name) + ": cannot set FD_CLOEXEC: " + std::strerror(errno);
  }
  return {};
}

}  // namespace

std::vector<ListenFd> inherited_listeners() {
  NameList names;
  // 1: unset LISTEN_* so that nothing this process starts believes the fds are its own.
  const int n = sd_listen_fds_with_names(1, &names.names);
  if (n < 0) throw std::runtime_error(std::string("LISTEN_FDS from systemd is invalid: ") + std::strerror(-n));

  std::vector<ListenFd> fds;
  std::string error;
  for (int i = 0; i < n; ++i) {
    const int fd = SD_LISTEN_FDS_START + i;
    ListenFd l{fd, names.names && names.names[i] ? names.names[i] : "unknown"};
    if (error.empty()) error = prepare(fd, l.name);
    fds.push_back(std::move(l));
  }
  if (error.empty()) return fds;
  // The caller gets no fds to close, so none may stay open behind its back.
  for (const ListenFd& l : fds) ::close(l.fd);
  throw std::runtime_error(error);
}

}  // namespace corepool
