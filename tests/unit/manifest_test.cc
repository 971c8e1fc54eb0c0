// Unit tests for supervisor/batch/manifest.h: the result key of each manifest line
// (common directory, --root, relative lines), what is skipped, and the errors
// that name the manifest line.
#include "supervisor/batch/manifest.h"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/scratch_dir_test.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ManifestTest : public testing::ScratchDirTest {
 protected:
  void touch(const std::string& name) {
    fs::create_directories(fs::path(path(name)).parent_path());
    std::ofstream(path(name)) << "x";
  }
  std::string manifest(const std::string& text, const std::string& name = "files.txt") {
    std::ofstream(path(name)) << text;
    return path(name);
  }
  static std::vector<std::string> keys(const InputList& list) {
    std::vector<std::string> out;
    for (const BatchInput& in : list.inputs) out.push_back(in.relative);
    return out;
  }
  static std::string manifest_error(const std::string& file, const std::string& root = "") {
    try {
      read_manifest(file, root);
    } catch (const ManifestError& e) {
      return e.what();
    }
    return "(no ManifestError)";
  }
};

TEST_F(ManifestTest, KeysAreRelativeToTheDeepestCommonDirectory) {
  const std::string m = manifest(dir_ + "/data/a/1.wav\n" + dir_ + "/data/b/c/2.wav\n" + dir_ + "/data/a/3.flac\n");
  const InputList list = read_manifest(m, "");
  EXPECT_THAT(keys(list), ElementsAre("a/1.wav", "b/c/2.wav", "a/3.flac"));
  EXPECT_EQ(list.inputs[0].path, dir_ + "/data/a/1.wav");
  EXPECT_EQ(list.inputs[1].origin, m + ":2");
}

TEST_F(ManifestTest, OneListedFileIsKeyedByItsNameLikeAFileArgument) {
  EXPECT_THAT(keys(read_manifest(manifest(dir_ + "/data/a/1.wav\n"), "")), ElementsAre("1.wav"));
}

TEST_F(ManifestTest, KeysAreRelativeToRootWhenGiven) {
  const std::string m = manifest(dir_ + "/data/a/1.wav\n" + dir_ + "/data/a/2.wav\n");
  EXPECT_THAT(keys(read_manifest(m, dir_ + "/data")), ElementsAre("a/1.wav", "a/2.wav"));
  EXPECT_THAT(keys(read_manifest(m, dir_ + "/data/")), ElementsAre("a/1.wav", "a/2.wav"));
  EXPECT_THAT(keys(read_manifest(m, dir_ + "/data/./x/..")), ElementsAre("a/1.wav", "a/2.wav"));
}

TEST_F(ManifestTest, RelativeLinesAreRelativeToTheManifestsOwnDirectory) {
  fs::create_directories(path("lists"));
  const std::string m = manifest("../data/x.wav\n./../data/sub/y.wav\n", "lists/files.txt");
  const InputList list = read_manifest(m, path("data"));
  EXPECT_THAT(keys(list), ElementsAre("x.wav", "sub/y.wav"));
  EXPECT_EQ(list.inputs[0].path, dir_ + "/data/x.wav");
}

TEST_F(ManifestTest, BlankLinesAndCarriageReturnsAreSkippedAndSpacesKept) {
  const std::string m = manifest("\n/d/a.wav\r\n   \n/d/with space .wav\n\t\n");
  EXPECT_THAT(keys(read_manifest(m, "")), ElementsAre("a.wav", "with space .wav"));
}

TEST_F(ManifestTest, ALineOutsideTheRootOrNamingADirectoryIsAnErrorOfThatLine) {
  const std::string m = manifest("/data/a.wav\n/elsewhere/b.wav\n/data/dir/\n");
  const InputList list = read_manifest(m, "/data");
  EXPECT_THAT(keys(list), ElementsAre("a.wav"));
  ASSERT_EQ(list.errors.size(), 2u);
  EXPECT_EQ(list.errors[0].message, m + ":2: /elsewhere/b.wav: not under --root /data");
  EXPECT_EQ(list.errors[0].key, "/elsewhere/b.wav");
  EXPECT_THAT(list.errors[1].message, HasSubstr(m + ":3: /data/dir/: names a directory"));
}

TEST_F(ManifestTest, AMissingOrEmptyManifestIsAnErrorNamingIt) {
  EXPECT_THAT(manifest_error(path("nope.txt")), HasSubstr("--manifest " + path("nope.txt") + ": cannot read"));
  EXPECT_THAT(manifest_error(manifest("\n \n")), HasSubstr("lists no file"));
}

TEST_F(ManifestTest, MissingListedFilesBecomeErrorsNamingTheLine) {
  touch("data/ok.wav");
  fs::create_directories(path("data/adir"));
  InputList list = read_manifest(manifest("data/ok.wav\ndata/gone.wav\ndata/adir\n"), path("data"));
  check_listed_files(list);
  EXPECT_THAT(keys(list), ElementsAre("ok.wav"));
  ASSERT_EQ(list.errors.size(), 2u);
  EXPECT_EQ(list.errors[0].key, "gone.wav");
  EXPECT_EQ(list.errors[0].message, path("files.txt") + ":2: " + path("data/gone.wav") + ": no such file or directory");
  EXPECT_THAT(list.errors[1].message, HasSubstr(":3: " + path("data/adir") + ": is a directory"));
}

TEST_F(ManifestTest, ADuplicateLineIsAnErrorOfItsResult) {
  touch("data/a.wav");
  const InputList list = expand_inputs({}, read_manifest(manifest("data/a.wav\ndata/./a.wav\n"), ""));
  EXPECT_THAT(keys(list), ElementsAre("a.wav"));
  ASSERT_EQ(list.errors.size(), 1u);
  EXPECT_EQ(list.errors[0].key, "a.wav");
  EXPECT_THAT(list.errors[0].message, HasSubstr("files.txt:2: "));
}

}  // namespace
}  // namespace corepool
