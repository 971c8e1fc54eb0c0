// The one fd counter of the tests: how many descriptors this process holds,
// for the leak checks that end a fixture (count in SetUp, compare in TearDown).
#pragma once

#include <filesystem>

namespace corepool::testing {

// Entries of /proc/self/fd, less the one the listing itself opens.
inline int open_fd_count() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++n;
  }
  return n - 1;
}

}  // namespace corepool::testing
