// A POSIX shm object as a Triton client makes one (shm_open, ftruncate), for
// the client shared memory tests. Unique key per object; the destructor
// unlinks it. Fixtures check for residue under /dev/shm with shm_residue().
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace corepool::testing {

// Every key of this process starts with this, so leftovers can be found.
inline std::string shm_test_prefix() { return "corepool-client-shm-test-" + std::to_string(::getpid()) + "-"; }

class ClientShmObject {
 public:
  explicit ClientShmObject(uint64_t size) {
    static std::atomic<int> counter{0};
    key_ = "/" + shm_test_prefix() + std::to_string(counter++);
    fd_ = ::shm_open(key_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd_ < 0) throw std::runtime_error("shm_open(" + key_ + ") failed");
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) throw std::runtime_error("ftruncate failed");
  }
  ~ClientShmObject() {
    unlink();
    ::close(fd_);
  }
  ClientShmObject(const ClientShmObject&) = delete;
  ClientShmObject& operator=(const ClientShmObject&) = delete;

  const std::string& key() const { return key_; }
  int fd() const { return fd_; }

  // As the client may at any time.
  void unlink() {
    if (!unlinked_) ::shm_unlink(key_.c_str());
    unlinked_ = true;
  }

  // Bytes written and read the way a client's own code would see them.
  void put(uint64_t at, const void* data, size_t n) const {
    if (::pwrite(fd_, data, n, static_cast<off_t>(at)) != static_cast<ssize_t>(n)) {
      throw std::runtime_error("pwrite to " + key_ + " failed");
    }
  }
  std::vector<unsigned char> get(uint64_t at, size_t n) const {
    std::vector<unsigned char> out(n);
    if (::pread(fd_, out.data(), n, static_cast<off_t>(at)) != static_cast<ssize_t>(n)) {
      throw std::runtime_error("pread from " + key_ + " failed");
    }
    return out;
  }

 private:
  std::string key_;
  int fd_ = -1;
  bool unlinked_ = false;
};

// Names of this process's test objects still under /dev/shm.
inline std::vector<std::string> shm_residue() {
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(shm_test_prefix(), 0) == 0) left.push_back(name);
  }
  return left;
}

}  // namespace corepool::testing
