// Triton's system shared memory extension, the registry: POSIX shm objects a
// client created (shm_open) and registered under a name, with the part of each
// (offset, byte_size) its tensors may use. The triton::Service implementation
// owns one and calls it from any thread; no LibTorch.
// A ClientShmRegion owns its fd: whoever holds its shared_ptr (a request in
// flight) can still read and write it after an unregister, or after the client
// shm_unlink'ed the key. Bytes move by pread/pwrite only, never a mapping: the
// client may truncate its file at any time, which must be an error, not SIGBUS.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "supervisor/triton/triton_service.h"

namespace corepool::triton {

class ClientShmRegion {
 public:
  // Takes ownership of `fd` (closed by the destructor), open on `key`.
  ClientShmRegion(std::string name, std::string key, uint64_t offset, uint64_t byte_size, int fd);
  ~ClientShmRegion();
  ClientShmRegion(const ClientShmRegion&) = delete;
  ClientShmRegion& operator=(const ClientShmRegion&) = delete;

  const std::string& name() const { return name_; }
  const std::string& key() const { return key_; }
  uint64_t offset() const { return offset_; }        // where the region starts in the shm object
  uint64_t byte_size() const { return byte_size_; }  // how much of it the region covers

  // kInvalidArgument unless [offset, offset + bytes) lies within the region
  // (offsets are relative to the region, as Triton's shared_memory_offset is).
  Status check_range(uint64_t offset, uint64_t bytes) const;
  // `bytes` at `offset` in the region into `dst`. A short read (the client
  // truncated its object) is kInvalidArgument "region X was truncated: ...".
  // Thread-safe (pread); `dst` is partly written on error.
  Status read(uint64_t offset, uint64_t bytes, void* dst) const;
  // `bytes` from `src` to `offset` in the region, after checking the object
  // still holds them (a pwrite past its end would silently grow it).
  Status write(uint64_t offset, uint64_t bytes, const void* src) const;

 private:
  Status truncated(const char* what, uint64_t offset, uint64_t bytes) const;

  const std::string name_;
  const std::string key_;
  const uint64_t offset_;
  const uint64_t byte_size_;
  const int fd_;
};

struct ClientShmOptions {
  bool allowed = false;  // serve.allow_client_shm
  std::string group;     // serve.client_shm_group: its regions are accepted too; "" = our uid only
};

class ClientShmRegistry {
 public:
  using Region = ClientShmRegion;

  // Resolves options.group (when allowed and set) with getgrnam_r: an unknown
  // group is kInvalidArgument naming it, for the caller to stop at startup.
  static Result<std::unique_ptr<ClientShmRegistry>> create(const ClientShmOptions& options);

  bool allowed() const { return allowed_; }

  // Opens `key` ("/name", as Triton's clients give it, or "name") O_RDWR and
  // keeps it open. Refused, with the registry unchanged: kPermissionDenied when
  // disabled, when the object belongs to another uid and not to the allowed
  // group, or when we may not open it read-write; kAlreadyExists for a
  // registered name; kInvalidArgument for a malformed or missing key (the key
  // in the message), something other than a regular shm object, a byte_size
  // of 0, or offset + byte_size past the object's current size.
  Status register_region(const std::string& name, const std::string& key, uint64_t offset, uint64_t byte_size);
  // Forgets `name` ("" = every region); requests holding a Region keep it.
  // An unknown name is kOk, as in Triton (clients unregister on cleanup).
  Status unregister(const std::string& name);
  // Triton's HTTP form: [{"name","key","offset","byte_size"}], by name; "" =
  // every region; an unknown name is kNotFound.
  Result<std::string> status_json(const std::string& name) const;
  // nullptr when no region of that name is registered.
  std::shared_ptr<const Region> find(const std::string& name) const;

 private:
  ClientShmRegistry(bool allowed, std::optional<gid_t> group, std::string group_name);
  Status check_owner(const Region& region, uid_t uid, gid_t gid) const;

  const bool allowed_;
  const std::optional<gid_t> group_;  // serve.client_shm_group, resolved
  const std::string group_name_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const Region>> regions_;  // by name; guarded by mutex_
};

}  // namespace corepool::triton
