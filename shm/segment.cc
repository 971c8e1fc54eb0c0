// Segment creation (shm object → size → reserve → map → remove the name),
// protection changes and the start-up sweep of names left by dead
// supervisors. Called by the supervisor before it forks; owns each mapping
// through its Segment and no name for longer than Segment::create() runs.
#include "shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <system_error>

#include <boost/interprocess/shared_memory_object.hpp>

namespace corepool::shm {
namespace {

namespace bip = boost::interprocess;

constexpr char kNamePrefix[] = "corepool.";

bool is_valid_purpose(const std::string& purpose) {
  if (purpose.empty() || purpose.size() > 64) return false;
  for (const char c : purpose) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// corepool.<pid>.<seq>.<purpose>: pid and seq make the name unique among live
// processes, pid lets sweep_dead_segments() find the owner.
std::string segment_name(const std::string& purpose) {
  static std::atomic<uint64_t> next_seq{0};
  return kNamePrefix + std::to_string(getpid()) + "." + std::to_string(next_seq.fetch_add(1)) +
         "." + purpose;
}

// Removes the name when create() leaves its scope, however it leaves: after a
// successful map (the mapping lives on, the name must not) and on every error.
struct NameRemover {
  const std::string& name;
  ~NameRemover() { bip::shared_memory_object::remove(name.c_str()); }
};

// ftruncate() on tmpfs reserves nothing: a full /dev/shm would only show up as
// SIGBUS on a later first touch. Reserving now turns that into an error here.
void reserve(const bip::shared_memory_object& object, std::size_t bytes) {
  const int fd = object.get_mapping_handle().handle;
  const int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) throw bip::interprocess_exception(std::generic_category().message(rc).c_str());
}

// The pid in "corepool.<pid>.<anything>", if the name has that shape.
std::optional<pid_t> owner_pid(const char* name) {
  const std::size_t prefix = sizeof kNamePrefix - 1;
  if (std::strncmp(name, kNamePrefix, prefix) != 0) return std::nullopt;
  int64_t pid = 0;
  const char* p = name + prefix;
  for (; *p >= '0' && *p <= '9'; ++p) {
    pid = pid * 10 + (*p - '0');
    if (pid > INT32_MAX) return std::nullopt;
  }
  if (p == name + prefix || *p != '.' || pid <= 0) return std::nullopt;
  return static_cast<pid_t>(pid);
}

int change_protection(void* data, std::size_t size, int prot) {
  if (data == nullptr) return -EINVAL;
  return mprotect(data, size, prot) == 0 ? 0 : -errno;
}

}  // namespace

Segment Segment::create(std::size_t bytes, const std::string& purpose) {
  if (!is_valid_purpose(purpose)) {
    throw std::invalid_argument("bad shared memory segment purpose '" + purpose +
                                "': use 1-64 of [A-Za-z0-9_.-]");
  }
  if (bytes == 0) {
    throw std::invalid_argument("shared memory segment '" + purpose + "' must not be empty");
  }
  const std::string name = segment_name(purpose);
  try {
    bip::shared_memory_object object(bip::create_only, name.c_str(), bip::read_write);
    const NameRemover remover{name};  // only now: a name we did not create is not ours
    object.truncate(static_cast<bip::offset_t>(bytes));
    reserve(object, bytes);
    bip::mapped_region region(object, bip::read_write, 0, bytes);
    return Segment(std::move(region));  // then remover drops the name, object closes its fd
  } catch (const bip::interprocess_exception& e) {
    throw std::runtime_error("cannot create shared memory segment '" + purpose + "' of " +
                             std::to_string(bytes) + " bytes: " + e.what());
  }
}

int Segment::protect_read_only() { return change_protection(data(), size(), PROT_READ); }

int Segment::protect_read_write() {
  return change_protection(data(), size(), PROT_READ | PROT_WRITE);
}

int sweep_dead_segments(const std::string& shm_dir) {
  const std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(shm_dir.c_str()), closedir);
  if (!dir) return -errno;
  int removed = 0;
  // Unlinking while reading the directory is allowed; readdir may or may not
  // return the removed entries again, and we never look twice at one anyway.
  while (const dirent* entry = readdir(dir.get())) {
    const std::optional<pid_t> pid = owner_pid(entry->d_name);
    if (!pid || *pid == getpid()) continue;
    // Only ESRCH proves the owner is gone; EPERM means it lives under another
    // user. A recycled pid keeps the file until that process exits too.
    if (kill(*pid, 0) == 0 || errno != ESRCH) continue;
    if (unlinkat(dirfd(dir.get()), entry->d_name, 0) == 0) ++removed;
  }
  return removed;
}

}  // namespace corepool::shm
