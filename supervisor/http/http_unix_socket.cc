#include "supervisor/http/http_unix_socket.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace corepool::http {

[[noreturn]] void throw_listen_error(const std::string& where, const std::string& why) {
  throw std::runtime_error("cannot listen on " + where + ": " + why);
}

int probe_unix_socket(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int rc;
  do rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  while (rc < 0 && errno == EINTR);
  rc = rc < 0 ? -errno : 0;
  ::close(fd);
  return rc;
}

void remove_stale_socket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // ENOENT: nothing to remove
  if (!S_ISSOCK(st.st_mode)) throw_listen_error(path, "exists and is not a socket");
  if (probe_unix_socket(path) == 0) throw_listen_error(path, "another server is listening there");
  if (::unlink(path.c_str()) != 0) throw_listen_error(path, std::string("cannot remove stale socket: ") + std::strerror(errno));
}

gid_t resolve_group(const std::string& path, const std::string& name) {
  group entry{};
  group* found = nullptr;
  std::vector<char> buf(16384);
  int rc;
  while ((rc = ::getgrnam_r(name.c_str(), &entry, buf.data(), buf.size(), &found)) == ERANGE) {
    buf.resize(buf.size() * 2);
  }
  if (rc != 0) throw_listen_error(path, "cannot look up group '" + name + "': " + std::strerror(rc));
  if (found == nullptr) throw_listen_error(path, "unknown group '" + name + "' (serve.unix_socket_group)");
  return entry.gr_gid;
}

}  // namespace corepool::http
