// ResultFile and its two helpers: the crash-safe write of one batch result
// (temp file, fsync, rename), the "is this result complete?" check a resumed
// batch uses to skip finished inputs, and the sweep of temp files left by dead
// runs. Called by the batch driver; owns one FILE* and one temp file at a time.
#include "supervisor/batch/result_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "supervisor/batch/parallel_each.h"

namespace corepool {
namespace fs = std::filesystem;

namespace {

// Closes a raw descriptor on every return path.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

int fsync_retrying(int fd) {
  int rc;
  do {
    rc = ::fsync(fd);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

// Makes the rename itself durable. Best effort: the result is already complete
// under its final name, and some filesystems refuse fsync on a directory, so a
// failure here must not turn a good result into a reported error.
std::string parent_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

void sync_directory(const std::string& dir_path) {
  FdGuard dir{::open(dir_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dir.fd >= 0) fsync_retrying(dir.fd);
}

}  // namespace

ResultFile::ResultFile(std::string final_path)
    : final_path_(std::move(final_path)),
      temp_path_(final_path_ + ".tmp." + std::to_string(::getpid())) {
  const std::string prefix = final_path_ + ": cannot create result file: ";
  const fs::path parent = fs::path(final_path_).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) throw std::runtime_error(prefix + ec.message());
  }
  int fd;
  // O_NOFOLLOW: a symbolic link planted under the temporary name must not
  // redirect (and truncate) some other file; it fails the open instead.
  do {
    fd = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw std::runtime_error(prefix + std::strerror(errno));
  file_ = ::fdopen(fd, "w");
  if (file_ == nullptr) {
    const int err = errno;
    ::close(fd);
    ::unlink(temp_path_.c_str());
    throw std::runtime_error(prefix + std::strerror(err));
  }
}

ResultFile::~ResultFile() { abandon(); }

void ResultFile::write_line(const nlohmann::json& line) {
  require_open("write_line");
  // Serialised in full before the write, so a throwing dump() adds nothing to
  // the file. Invalid UTF-8 (a file name is any bytes on Linux) is replaced
  // with U+FFFD rather than failing the whole input over one name.
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.push_back('\n');
  write_text(text);
}

void ResultFile::write_text(const std::string& text) {
  require_open("write_text");
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) {
    fail("cannot write result file");
  }
}

void DirectorySyncs::add_parent_of(const std::string& path) {
  std::string parent = parent_of(path);
  std::lock_guard<std::mutex> lock(mu_);
  dirs_.insert(std::move(parent));
}

void DirectorySyncs::sync() {
  std::set<std::string> dirs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dirs.swap(dirs_);
  }
  for (const std::string& dir : dirs) sync_directory(dir);
}

size_t DirectorySyncs::pending() {
  std::lock_guard<std::mutex> lock(mu_);
  return dirs_.size();
}

void CommitGroup::add(ResultFile& file, Done done) { files_.push_back({&file, std::move(done), {}}); }

void CommitGroup::commit() {
  if (files_.empty()) return;
  std::vector<Added> files;
  files.swap(files_);
  const int threads = files.size() >= kParallelFrom ? kThreads : 1;
  parallel_each(files.size(), threads, [&](size_t i) {
    try {
      files[i].file->commit(&dirs_);
    } catch (const std::exception& e) {
      files[i].error = e.what();
    }
  });
  dirs_.sync();
  for (Added& a : files) a.done(a.error);
}

void ResultFile::commit(DirectorySyncs* later) {
  require_open("commit");
  if (std::fflush(file_) != 0) fail("cannot write result file");
  if (fsync_retrying(::fileno(file_)) != 0) fail("cannot fsync result file");
  std::FILE* file = std::exchange(file_, nullptr);  // fclose frees it even on error
  if (std::fclose(file) != 0) fail("cannot close result file");
  if (std::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    fail("cannot rename " + temp_path_ + " into place");
  }
  state_ = State::kCommitted;
  if (later) {
    later->add_parent_of(final_path_);
  } else {
    sync_directory(parent_of(final_path_));
  }
}

void ResultFile::abandon() {
  if (state_ != State::kOpen) return;  // the temp file is gone or is the result now
  state_ = State::kAbandoned;
  if (file_ != nullptr) std::fclose(std::exchange(file_, nullptr));
  ::unlink(temp_path_.c_str());
}

void ResultFile::require_open(const char* operation) const {
  if (state_ != State::kOpen) {
    throw std::logic_error(final_path_ + ": ResultFile::" + operation +
                           " after commit or abandon");
  }
}

// Cleans up first, so a failed result never lingers under either name.
void ResultFile::fail(const std::string& what) {
  const int err = errno;  // abandon() may overwrite it
  abandon();
  throw std::runtime_error(final_path_ + ": " + what + ": " + std::strerror(err));
}

namespace {

bool pread_all(int fd, char* data, size_t size, off_t offset) {
  while (size > 0) {
    const ssize_t n = ::pread(fd, data, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // error, or the file shrank under us
    data += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return true;
}

// Finds the last non-blank line by reading ever larger windows from the end
// (64 KiB, doubling). Re-reading keeps the code simple and costs at most twice
// the bytes of the window that finally holds the line.
bool read_last_line(int fd, off_t file_size, std::string& line) {
  constexpr size_t kFirstWindow = 64 * 1024;
  constexpr size_t kMaxWindow = 16 * 1024 * 1024;
  const size_t size = static_cast<size_t>(file_size);
  std::string tail;
  for (size_t window = kFirstWindow;; window *= 2) {
    const size_t n = std::min(window, size);
    tail.resize(n);
    if (!pread_all(fd, tail.data(), n, file_size - static_cast<off_t>(n))) return false;
    const bool whole_file = n == size;
    const size_t last = tail.find_last_not_of(" \t\r\n");
    if (last != std::string::npos) {
      const size_t newline = tail.rfind('\n', last);
      if (newline != std::string::npos || whole_file) {
        const size_t first = newline == std::string::npos ? 0 : newline + 1;
        line = tail.substr(first, last + 1 - first);
        return true;
      }
    }
    if (whole_file || n >= kMaxWindow) return false;
  }
}

}  // namespace

std::optional<nlohmann::json> result_summary(const std::string& path) {
  FdGuard file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  struct stat st;
  if (file.fd < 0 || ::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  std::string line;
  if (!read_last_line(file.fd, st.st_size, line)) return std::nullopt;
  auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("summary")) return std::nullopt;
  return std::move(json["summary"]);
}

bool result_is_complete(const std::string& path) { return result_summary(path).has_value(); }

bool result_file_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

namespace {

// The pid in "<final>.tmp.<pid>", or 0 if `name` does not have that shape.
// pid 0 and negative pids are never returned: kill() would treat them as
// process groups, not as one run.
pid_t temp_file_owner(const std::string& name) {
  const size_t dot = name.rfind(".tmp.");
  if (dot == std::string::npos || dot == 0) return 0;
  const char* digits = name.data() + dot + 5;
  const char* end = name.data() + name.size();
  unsigned long pid = 0;  // unsigned: from_chars then rejects a '-' sign
  const auto [ptr, ec] = std::from_chars(digits, end, pid);
  if (ec != std::errc() || ptr != end || pid == 0 || pid > INT_MAX) return 0;
  return static_cast<pid_t>(pid);
}

// Only ESRCH proves the owner is gone; EPERM means a live process of another
// user. A reused pid keeps a stale file around, which is the safe mistake.
bool owner_is_dead(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace

int sweep_stale_temp_files(const std::string& dir, const std::function<bool(const std::string&)>& owned) {
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  fs::path base(dir);
  if (!base.has_filename()) base = base.parent_path();  // "out/" -> "out", for lexically_relative
  // Collected first and removed after, so the walk never sees its own deletions.
  std::vector<fs::path> stale;
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code status_ec;
    // symlink_status: a link is never followed, never removed.
    if (!fs::is_regular_file(it->symlink_status(status_ec))) continue;
    const std::string name = it->path().filename().string();
    const pid_t owner = temp_file_owner(name);
    if (owner == 0) continue;
    if (owned) {
      const fs::path final_path = it->path().parent_path() / name.substr(0, name.rfind(".tmp."));
      if (!owned(final_path.lexically_relative(base).string())) continue;
    }
    if (owner_is_dead(owner)) stale.push_back(it->path());
  }
  int removed = 0;
  for (const fs::path& path : stale) {
    std::error_code remove_ec;
    if (fs::remove(path, remove_ec)) ++removed;
  }
  return removed;
}

}  // namespace corepool
