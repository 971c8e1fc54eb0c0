// A gtest fixture base for tests that write files: a fresh TempDir per test
// and a check that the test leaked no file descriptor. Fixtures that need more
// (a server, a leak check of their own) derive from it.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "tests/support/fd_count.h"
#include "tests/support/temp_dir.h"

namespace corepool::testing {

class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override { fds_at_start_ = open_fd_count(); }
  void TearDown() override { EXPECT_EQ(open_fd_count(), fds_at_start_) << "a file handle leaked"; }
  std::string path(const std::string& name) const { return temp_ / name; }

  TempDir temp_;
  const std::string dir_ = temp_.path();
  int fds_at_start_ = 0;
};

}  // namespace corepool::testing
