// Manifest parsing and the result-key rule for listed files: lexical only
// (fs::path::lexically_normal / lexically_relative), so the key of a line never
// depends on the filesystem it is read on. Called by batch and merge.
#include "supervisor/batch/manifest.h"

#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

namespace fs = std::filesystem;

namespace corepool {
namespace {

struct Line {
  size_t number;
  fs::path path;  // absolute, lexically normal
};

bool blank(const std::string& s) { return s.find_first_not_of(" \t") == std::string::npos; }

std::vector<Line> read_lines(const std::string& file) {
  std::ifstream in(file);
  if (!in) {
    std::error_code ec(errno, std::generic_category());
    throw ManifestError("--manifest " + file + ": cannot read: " + ec.message());
  }
  const fs::path base = fs::absolute(file).parent_path();
  std::vector<Line> lines;
  size_t number = 0;
  for (std::string text; std::getline(in, text);) {
    ++number;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (blank(text)) continue;
    lines.push_back({number, (base / text).lexically_normal()});
  }
  if (in.bad()) throw ManifestError("--manifest " + file + ": read error after line " + std::to_string(number));
  if (lines.empty()) throw ManifestError("--manifest " + file + ": lists no file (only blank lines)");
  return lines;
}

// The deepest directory that contains every listed path.
fs::path common_root(const std::vector<Line>& lines) {
  fs::path root = lines.front().path.parent_path();
  for (const Line& line : lines) {
    const fs::path dir = line.path.parent_path();
    fs::path common;
    for (auto a = root.begin(), b = dir.begin(); a != root.end() && b != dir.end() && *a == *b; ++a, ++b) {
      common /= *a;
    }
    root = common;
  }
  return root;
}

bool escapes(const fs::path& relative) {
  return relative.empty() || relative == "." || *relative.begin() == "..";
}

}  // namespace

InputList read_manifest(const std::string& file, const std::string& root_flag) {
  const std::vector<Line> lines = read_lines(file);
  fs::path root = root_flag.empty() ? common_root(lines) : fs::absolute(root_flag).lexically_normal();
  if (!root_flag.empty() && root.filename().empty()) root = root.parent_path();  // "/data/" -> "/data"
  InputList list;
  for (const Line& line : lines) {
    const std::string origin = file + ":" + std::to_string(line.number);
    const std::string path = line.path.string();
    if (line.path.filename().empty()) {
      list.errors.push_back({path, origin + ": " + path + ": names a directory; a manifest lists files"});
      continue;
    }
    const fs::path key = line.path.lexically_relative(root);
    if (escapes(key)) {
      list.errors.push_back({path, origin + ": " + path + ": not under --root " + root.string()});
      continue;
    }
    list.inputs.push_back({path, key.string(), origin});
  }
  return list;
}

void check_listed_files(InputList& list) {
  std::vector<BatchInput> kept;
  for (BatchInput& in : list.inputs) {
    std::error_code ec;
    const fs::file_status status = fs::status(in.path, ec);
    std::string problem;
    if (in.origin.empty()) {
      // an argument, checked by expand_inputs already
    } else if (status.type() == fs::file_type::not_found) {
      problem = "no such file or directory";
    } else if (ec) {
      problem = ec.message();
    } else if (fs::is_directory(status)) {
      problem = "is a directory; a manifest lists files";
    }
    if (problem.empty()) {
      kept.push_back(std::move(in));
    } else {
      list.errors.push_back({in.relative, in.origin + ": " + in.path + ": " + problem});
    }
  }
  list.inputs = std::move(kept);
}

}  // namespace corepool
