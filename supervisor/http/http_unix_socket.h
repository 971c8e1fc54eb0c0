// What listening on a Unix socket path needs before bind(): clearing a socket
// file a dead server left behind (never anything else), and the group that
// will own the socket. Used by HttpServer::Impl::listen_unix(); every failure
// throws std::runtime_error "cannot listen on PATH: why".
#pragma once

#include <sys/types.h>

#include <string>

namespace corepool::http {

[[noreturn]] void throw_listen_error(const std::string& where, const std::string& why);

// connect() to a Unix socket path: 0 when someone is listening, else -errno.
int probe_unix_socket(const std::string& path);

// A socket file left by a dead server is removed; a live one or any other
// kind of file is an error: we never delete what we did not create.
void remove_stale_socket(const std::string& path);

// The gid of group `name` (serve.unix_socket_group). Resolved before the
// socket exists, so an unknown group leaves nothing behind.
gid_t resolve_group(const std::string& path, const std::string& name);

}  // namespace corepool::http
