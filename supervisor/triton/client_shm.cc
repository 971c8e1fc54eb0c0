// The client shm registry. Every refusal says what and where (the key, the
// sizes) and leaves the registry as it was; no call can SIGBUS or block.
#include "supervisor/triton/client_shm.h"

#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace corepool::triton {
namespace {

// pread/pwrite move at most this much per call on Linux anyway.
constexpr uint64_t kMaxIoChunk = 1u << 30;

Status error(Code code, std::string message) { return Status{code, std::move(message)}; }

// A client's string in a message: JSON-quoted, so control characters and
// invalid UTF-8 cannot corrupt the JSON error body that carries it.
std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status disabled() {
  return error(Code::kPermissionDenied, "system shared memory is disabled (serve.allow_client_shm = false)");
}

// A POSIX shm name: one optional leading '/', then one file name under
// /dev/shm. glibc refuses other '/' itself; "." and ".." and NUL (which
// c_str() would cut at) are refused here so that every key means one object.
Status check_key(const std::string& key) {
  const std::string base = key.empty() || key[0] != '/' ? key : key.substr(1);
  if (base.empty() || base.size() > NAME_MAX || base == "." || base == ".." ||
      base.find_first_of(std::string("/\0", 2)) != std::string::npos) {
    return error(Code::kInvalidArgument, "key " + quoted(key) + ": not a shared memory key (\"/name\", the name 1.." +
                                             std::to_string(NAME_MAX) + " characters without '/')");
  }
  return {};
}

// O_NONBLOCK: a FIFO someone put under /dev/shm must not stall the caller
// (it is refused after fstat). glibc adds O_NOFOLLOW itself.
Result<int> open_key(const std::string& key) {
  int fd;
  do {
    fd = ::shm_open(key.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK, 0);
  } while (fd < 0 && errno == EINTR);
  if (fd >= 0) return {{}, fd};
  const int err = errno;
  const std::string why = " (shm_open: " + std::string(std::strerror(err)) + ")";
  switch (err) {
    case ENOENT:
      return {error(Code::kInvalidArgument, "key " + quoted(key) + ": no such shared memory object" + why), -1};
    case EACCES:
    case EPERM:
      return {error(Code::kPermissionDenied, "key " + quoted(key) + ": not readable and writable by corepool" + why),
              -1};
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      return {error(Code::kInternal, "key " + quoted(key) + ": cannot open it now" + why), -1};
    default:
      return {error(Code::kInvalidArgument, "key " + quoted(key) + ": cannot open it" + why), -1};
  }
}

Result<gid_t> resolve_group(const std::string& name) {
  std::vector<char> buf(1024);
  group entry{};
  group* found = nullptr;
  int rc;
  while ((rc = ::getgrnam_r(name.c_str(), &entry, buf.data(), buf.size(), &found)) == ERANGE &&
         buf.size() < (1u << 20)) {
    buf.resize(buf.size() * 2);
  }
  if (rc != 0) {
    return {error(Code::kInvalidArgument, "serve.client_shm_group " + quoted(name) +
                                              ": cannot look it up (" + std::strerror(rc) + ")"),
            0};
  }
  if (!found) return {error(Code::kInvalidArgument, "serve.client_shm_group " + quoted(name) + ": no such group"), 0};
  return {{}, found->gr_gid};
}

// st_size, or -errno.
int64_t current_size(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return -errno;
  return st.st_size;
}

}  // namespace

// ---------------------------------------------------------------- region

ClientShmRegion::ClientShmRegion(std::string name, std::string key, uint64_t offset, uint64_t byte_size, int fd)
    : name_(std::move(name)), key_(std::move(key)), offset_(offset), byte_size_(byte_size), fd_(fd) {}

ClientShmRegion::~ClientShmRegion() { ::close(fd_); }

Status ClientShmRegion::check_range(uint64_t offset, uint64_t bytes) const {
  // Written so that nothing overflows: offset <= byte_size_ first.
  if (offset > byte_size_ || bytes > byte_size_ - offset) {
    return error(Code::kInvalidArgument, "region " + quoted(name_) + ": offset " + std::to_string(offset) +
                                             " + " + std::to_string(bytes) + " bytes is past its end (" +
                                             std::to_string(byte_size_) + " bytes)");
  }
  return {};
}

Status ClientShmRegion::truncated(const char* what, uint64_t offset, uint64_t bytes) const {
  const int64_t size = current_size(fd_);
  const uint64_t start = offset_ + offset;
  return error(Code::kInvalidArgument,
               "region " + quoted(name_) + " was truncated: the " + what + " needs bytes " + std::to_string(start) +
                   ".." + std::to_string(start + bytes) + " of " + quoted(key_) + ", which now holds " +
                   (size < 0 ? "an unknown number of" : std::to_string(size)) + " bytes");
}

Status ClientShmRegion::read(uint64_t offset, uint64_t bytes, void* dst) const {
  if (Status s = check_range(offset, bytes); !s.ok()) return s;
  char* out = static_cast<char*>(dst);
  // Registration checked offset_ + byte_size_ <= st_size, so every position fits in off_t.
  for (uint64_t done = 0; done < bytes;) {
    const ssize_t n = ::pread(fd_, out + done, std::min(bytes - done, kMaxIoChunk),
                              static_cast<off_t>(offset_ + offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return error(Code::kInternal, "region " + quoted(name_) + ": pread failed: " + std::strerror(errno));
    }
    if (n == 0) return truncated("read", offset, bytes);  // end of file before `bytes`
    done += static_cast<uint64_t>(n);
  }
  return {};
}

Status ClientShmRegion::write(uint64_t offset, uint64_t bytes, const void* src) const {
  if (Status s = check_range(offset, bytes); !s.ok()) return s;
  // pwrite past the end would grow the object instead of failing. A client
  // that truncates between this check and the pwrite gets its object grown
  // back by at most the registered bytes: its own doing, and harmless to us.
  const int64_t size = current_size(fd_);
  if (size < 0 || static_cast<uint64_t>(size) < offset_ + offset + bytes) return truncated("write", offset, bytes);
  const char* in = static_cast<const char*>(src);
  for (uint64_t done = 0; done < bytes;) {
    const ssize_t n = ::pwrite(fd_, in + done, std::min(bytes - done, kMaxIoChunk),
                               static_cast<off_t>(offset_ + offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return error(Code::kInternal, "region " + quoted(name_) + ": pwrite failed: " +
                                        (n < 0 ? std::strerror(errno) : "nothing written"));
    }
    done += static_cast<uint64_t>(n);
  }
  return {};
}

// ---------------------------------------------------------------- registry

ClientShmRegistry::ClientShmRegistry(bool allowed, std::optional<gid_t> group, std::string group_name)
    : allowed_(allowed), group_(group), group_name_(std::move(group_name)) {}

Result<std::unique_ptr<ClientShmRegistry>> ClientShmRegistry::create(const ClientShmOptions& options) {
  std::optional<gid_t> group;
  if (options.allowed && !options.group.empty()) {
    Result<gid_t> gid = resolve_group(options.group);
    if (!gid.status.ok()) return {gid.status, nullptr};
    group = gid.value;
  }
  return {{}, std::unique_ptr<ClientShmRegistry>(new ClientShmRegistry(options.allowed, group, options.group))};
}

// Opening succeeds for objects of other users whose mode lets us in (or for
// any object when we run as root): the owner check is what keeps a client
// from having the server read or overwrite someone else's memory.
Status ClientShmRegistry::check_owner(const Region& region, uid_t uid, gid_t gid) const {
  if (uid == ::geteuid() || (group_ && gid == *group_)) return {};
  std::string accepted = "uid " + std::to_string(::geteuid()) + " (corepool's)";
  if (group_) accepted += " or group " + quoted(group_name_) + " (gid " + std::to_string(*group_) + ")";
  return error(Code::kPermissionDenied, "key " + quoted(region.key()) + ": owned by uid " + std::to_string(uid) +
                                            ", gid " + std::to_string(gid) + "; only objects of " + accepted +
                                            " are accepted");
}

Status ClientShmRegistry::register_region(const std::string& name, const std::string& key, uint64_t offset,
                                          uint64_t byte_size) {
  if (!allowed_) return disabled();
  if (name.empty()) return error(Code::kInvalidArgument, "name: a region name must not be empty");
  if (Status s = check_key(key); !s.ok()) return s;
  if (byte_size == 0) return error(Code::kInvalidArgument, "byte_size: must be at least 1");
  if (find(name)) {  // checked again on insert; this saves opening the key
    return error(Code::kAlreadyExists, "region " + quoted(name) + " is already registered; unregister it first");
  }
  Result<int> fd = open_key(key);
  if (!fd.status.ok()) return fd.status;
  auto region = std::make_shared<const Region>(name, key, offset, byte_size, fd.value);  // owns the fd from here

  struct stat st {};
  if (::fstat(fd.value, &st) != 0) {
    return error(Code::kInternal, "key " + quoted(key) + ": fstat failed: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return error(Code::kInvalidArgument, "key " + quoted(key) + ": not a shared memory object");
  if (Status s = check_owner(*region, st.st_uid, st.st_gid); !s.ok()) return s;
  const uint64_t size = static_cast<uint64_t>(st.st_size);  // never negative for a regular file
  if (offset > size || byte_size > size - offset) {  // overflow-safe offset + byte_size > size
    return error(Code::kInvalidArgument, "offset + byte_size: " + std::to_string(offset) + " + " +
                                             std::to_string(byte_size) + " is past the end of " + quoted(key) + " (" +
                                             std::to_string(size) + " bytes)");
  }

  std::lock_guard<std::mutex> lock(mutex_);
  if (!regions_.emplace(name, region).second) {
    return error(Code::kAlreadyExists, "region " + quoted(name) + " is already registered; unregister it first");
  }
  spdlog::info("client shm: registered region {} (key {}, offset {}, {} bytes)", quoted(name), quoted(key), offset,
               byte_size);
  return {};
}

Status ClientShmRegistry::unregister(const std::string& name) {
  if (!allowed_) return disabled();
  std::lock_guard<std::mutex> lock(mutex_);
  // Erasing drops the registry's reference only; a Region held by a request
  // closes its fd when that request lets go.
  if (name.empty()) {
    if (!regions_.empty()) spdlog::info("client shm: unregistered all {} regions", regions_.size());
    regions_.clear();
  } else if (regions_.erase(name) != 0) {
    spdlog::info("client shm: unregistered region {}", quoted(name));
  }
  return {};
}

Result<std::string> ClientShmRegistry::status_json(const std::string& name) const {
  if (!allowed_) return {disabled(), ""};
  auto entry = [](const Region& r) {
    return nlohmann::json{{"name", r.name()}, {"key", r.key()}, {"offset", r.offset()}, {"byte_size", r.byte_size()}};
  };
  nlohmann::json out = nlohmann::json::array();
  std::lock_guard<std::mutex> lock(mutex_);
  if (name.empty()) {
    for (const auto& [_, region] : regions_) out.push_back(entry(*region));
  } else {
    auto it = regions_.find(name);
    if (it == regions_.end()) return {error(Code::kNotFound, "no shared memory region " + quoted(name)), ""};
    out.push_back(entry(*it->second));
  }
  return {{}, out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

std::shared_ptr<const ClientShmRegion> ClientShmRegistry::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = regions_.find(name);
  return it == regions_.end() ? nullptr : it->second;
}

}  // namespace corepool::triton
