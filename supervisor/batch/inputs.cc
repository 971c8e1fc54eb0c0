// Input discovery for batch. glob(3) handles patterns the shell did not expand
// (quoted ones); std::filesystem walks directories without following symlinked
// directories, so a link loop cannot make the walk endless.
#include "supervisor/batch/inputs.h"

#include <glob.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <system_error>

namespace fs = std::filesystem;

namespace corepool {
namespace {

bool is_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::vector<std::string> glob_paths(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> out;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  return out;
}

using Errors = std::vector<InputError>;

void walk_directory(const fs::path& root, std::vector<BatchInput>& found, Errors& errors) {
  std::error_code ec;
  std::vector<BatchInput> here;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
  if (ec) {
    errors.push_back({"", root.string() + ": cannot read directory: " + ec.message()});
    return;
  }
  for (; it != end; it.increment(ec)) {
    if (ec) {
      errors.push_back({"", root.string() + ": error while walking: " + ec.message()});
      break;
    }
    if (!it->is_regular_file(ec) || !has_audio_extension(it->path().string())) continue;
    here.push_back({it->path().string(), fs::relative(it->path(), root, ec).string(), ""});
  }
  std::sort(here.begin(), here.end(), [](const auto& a, const auto& b) { return a.relative < b.relative; });
  found.insert(found.end(), here.begin(), here.end());
}

void expand_one(const std::string& arg, std::vector<BatchInput>& found, Errors& errors) {
  std::error_code ec;
  const fs::path p(arg);
  if (fs::is_directory(p, ec)) return walk_directory(p, found, errors);
  if (fs::exists(p, ec)) {
    found.push_back({arg, p.filename().string(), ""});
    return;
  }
  if (is_glob(arg)) {
    std::vector<std::string> matches = glob_paths(arg);
    if (matches.empty()) errors.push_back({"", arg + ": pattern matches no file"});
    for (const auto& m : matches) expand_one(m, found, errors);
    return;
  }
  errors.push_back({"", arg + ": no such file or directory"});
}

}  // namespace

bool has_audio_extension(const std::string& path) {
  // What FFmpeg reads that holds audio; a directory's other files are skipped.
  static const std::set<std::string> kExtensions = {
      ".wav", ".wave", ".flac", ".ogg", ".oga", ".opus", ".aif", ".aiff", ".au", ".snd", ".caf", ".w64",
      ".mp3", ".m4a", ".m4b", ".aac", ".mp4", ".mov", ".mkv", ".mka", ".webm", ".amr", ".wma", ".wmv",
      ".asf", ".ac3", ".mp2", ".wv", ".ape", ".spx", ".3gp", ".avi", ".ts"};
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return kExtensions.count(ext) > 0;
}

InputList expand_inputs(const std::vector<std::string>& args, InputList listed) {
  InputList list;
  list.errors = std::move(listed.errors);
  std::vector<BatchInput> found = std::move(listed.inputs);
  for (const auto& arg : args) expand_one(arg, found, list.errors);
  std::set<std::string> seen_outputs;
  for (auto& in : found) {
    if (!seen_outputs.insert(in.relative).second) {
      // Keyed: the shard that owns the result reports the clash, once.
      const std::string where = in.origin.empty() ? in.path : in.origin + ": " + in.path;
      list.errors.push_back({in.relative, where + ": another input already writes the result '" + in.relative +
                                              "'; process them in separate runs or directories"});
      continue;
    }
    list.inputs.push_back(std::move(in));
  }
  return list;
}

}  // namespace corepool
