// The one temp dir of the tests: a fresh directory under /tmp, removed with
// everything in it when the object dies; and reading back the files in it. Fixtures hold one as a member; tests
// that need a second one make another. Header-only, no LibTorch, no gtest.
#pragma once

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace corepool::testing {

class TempDir {
 public:
  // /tmp, not $TMPDIR: Unix socket paths inside must fit in sun_path's 108 bytes.
  explicit TempDir(const std::string& prefix = "corepool-test") {
    std::string pattern = "/tmp/" + prefix + "-XXXXXX";
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The non-empty lines of `text`.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

}  // namespace corepool::testing
