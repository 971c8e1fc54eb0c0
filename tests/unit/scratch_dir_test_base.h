// A gtest fixture base for tests that write files: a fresh temp dir per test
// (removed in TearDown) and a check that the test leaked no file descriptor.
// Used by the audio validation and stream tests.
#pragma once

#include <dirent.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace corepool::testing {

inline int open_fd_count() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corepool-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fds_at_start_ = open_fd_count();
  }
  void TearDown() override {
    EXPECT_EQ(open_fd_count(), fds_at_start_) << "a file handle leaked";
    std::filesystem::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
  int fds_at_start_ = 0;
};

}  // namespace corepool::testing
