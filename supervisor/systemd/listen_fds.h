// Socket activation for `corepool serve`: takes over the listening sockets that
// systemd (corepool.socket) or systemd-socket-activate passed at exec time.
// Called once by ServeProcess::start() (supervisor/serve/serve.cc), before any
// worker exists; the caller owns the returned fds: the HTTP server takes them
// over (HttpServerOptions::inherited_fds), the gRPC server the one named "grpc".
#pragma once

#include <string>
#include <vector>

namespace corepool {

struct ListenFd {
  int fd;            // SD_LISTEN_FDS_START (3) and up
  std::string name;  // FileDescriptorName= of the socket unit; "unknown" if unnamed
};

// The fds handed over by systemd (LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES, which
// are unset afterwards so that no child takes them for its own). Each must be
// a listening SOCK_STREAM socket (TCP or Unix); each is made O_NONBLOCK and
// FD_CLOEXEC. FD_CLOEXEC only covers exec: forked workers still inherit the
// fds and should close them. Empty when not socket-activated. Throws
// std::runtime_error naming the fd and its name otherwise, after closing them all.
std::vector<ListenFd> inherited_listeners();

}  // namespace corepool
