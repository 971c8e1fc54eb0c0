// Helpers shared by the libFuzzer targets of tests/fuzz: a file whose
// contents are the fuzz input (the config parsers take a path), and a fatal
// stop that names what broke. Each target is its own process; nothing here is
// thread-safe or needs to be.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace corepool::fuzz {

// A finding: libFuzzer saves the input that got here and reports a crash.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

// An anonymous in-memory file, rewritten for every input and opened by the
// code under test through "/proc/self/fd/N": no temp files, no disk I/O.
class InputFile {
 public:
  InputFile() : fd_(::memfd_create("corepool-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) fail("memfd_create failed");
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Replaces the contents with `data` and returns the path to open.
  std::string write(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) fail("ftruncate failed");
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) fail("pwrite failed");
      done += static_cast<size_t>(n);
    }
    return "/proc/self/fd/" + std::to_string(fd_);
  }

 private:
  int fd_;
};

}  // namespace corepool::fuzz
