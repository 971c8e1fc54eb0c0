// Confinement of batch result paths to the output directory; see result_path.h.
// Lexical checks first (no file system access), then the components that
// already exist below the output directory, without following any link.
#include "supervisor/batch/result_path.h"

#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace fs = std::filesystem;

namespace corepool {
namespace {

[[noreturn]] void refuse(const std::string& path, const std::string& out_dir, const std::string& why) {
  throw std::runtime_error("result " + path + " refused: " + why + "; results are written only inside " +
                           out_dir);
}

// The existing part of `path` below `out_dir`: every directory must be a real
// one, and the file itself must not be a link (its rename would drop the link,
// but reading it to skip a complete result would follow it).
void check_existing(const fs::path& out_dir, const fs::path& rel, const std::string& path,
                    const std::string& shown_out) {
  fs::path at = out_dir;
  std::error_code ec;
  size_t left = static_cast<size_t>(std::distance(rel.begin(), rel.end()));
  for (const fs::path& part : rel) {
    at /= part;
    --left;
    const fs::file_status st = fs::symlink_status(at, ec);
    if (ec || st.type() == fs::file_type::not_found) return;  // nothing further exists yet
    if (st.type() == fs::file_type::symlink) refuse(path, shown_out, at.string() + " is a symbolic link");
    if (left > 0 && st.type() != fs::file_type::directory) {
      refuse(path, shown_out, at.string() + " is not a directory");
    }
  }
}

}  // namespace

std::string result_path(const std::string& out_dir, const std::string& relative, const std::string& extension) {
  const std::string path = out_dir + "/" + relative + extension;
  const fs::path rel(relative + extension);
  if (relative.empty()) refuse(path, out_dir, "the input has no name");
  if (rel.is_absolute()) refuse(path, out_dir, "'" + relative + "' is an absolute path");
  for (const fs::path& part : rel) {
    if (part == "..") refuse(path, out_dir, "'" + relative + "' climbs out with '..'");
  }
  check_existing(fs::path(out_dir), rel, path, out_dir);
  return path;
}

}  // namespace corepool
