// Unit tests for supervisor/batch/result_path.h on a real scratch directory: a batch
// result lands under the output directory or is refused with a message naming
// the path and the reason.
#include "supervisor/batch/result_path.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/scratch_dir_test.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ResultPathTest : public testing::ScratchDirTest {
 protected:
  // The message of the refusal, or "" when the path was accepted.
  std::string refusal(const std::string& relative) {
    try {
      result_path(path("out"), relative);
      return "";
    } catch (const std::runtime_error& e) {
      return e.what();
    }
  }
};

TEST_F(ResultPathTest, PlainAndNestedNamesLandUnderTheOutputDirectory) {
  EXPECT_EQ(result_path(path("out"), "a.wav"), path("out") + "/a.wav.jsonl");
  EXPECT_EQ(result_path(path("out"), "x/y/b.flac"), path("out") + "/x/y/b.flac.jsonl");
}

TEST_F(ResultPathTest, ParentComponentsAreRefused) {
  EXPECT_THAT(refusal("../x.wav"), HasSubstr("'../x.wav' climbs out with '..'"));
  EXPECT_THAT(refusal("a/../../x.wav"), HasSubstr("climbs out"));
  EXPECT_THAT(refusal("../x.wav"), HasSubstr("results are written only inside " + path("out")));
}

TEST_F(ResultPathTest, AbsoluteAndEmptyNamesAreRefused) {
  EXPECT_THAT(refusal("/etc/x.wav"), HasSubstr("'/etc/x.wav' is an absolute path"));
  EXPECT_THAT(refusal(""), HasSubstr("the input has no name"));
}

TEST_F(ResultPathTest, SymlinkedDirectoryBelowTheOutputDirectoryIsRefused) {
  fs::create_directories(path("out"));
  fs::create_directories(path("elsewhere"));
  fs::create_directory_symlink(path("elsewhere"), path("out/sub"));
  EXPECT_THAT(refusal("sub/x.wav"), HasSubstr(path("out/sub") + " is a symbolic link"));
}

TEST_F(ResultPathTest, SymlinkAtTheResultNameIsRefused) {
  fs::create_directories(path("out"));
  std::ofstream(path("victim")) << "precious";
  fs::create_symlink(path("victim"), path("out/x.wav.jsonl"));
  EXPECT_THAT(refusal("x.wav"), HasSubstr("x.wav.jsonl is a symbolic link"));
}

TEST_F(ResultPathTest, FileWhereADirectoryShouldBeIsRefused) {
  fs::create_directories(path("out"));
  std::ofstream(path("out/sub")) << "a file";
  EXPECT_THAT(refusal("sub/x.wav"), HasSubstr(path("out/sub") + " is not a directory"));
}

TEST_F(ResultPathTest, OutputDirectoryItselfMayBeALink) {
  fs::create_directories(path("real"));
  fs::create_directory_symlink(path("real"), path("out"));
  EXPECT_EQ(result_path(path("out"), "a.wav"), path("out") + "/a.wav.jsonl");
}

}  // namespace
}  // namespace corepool
