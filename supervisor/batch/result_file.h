// Batch output: one result file per input (JSON Lines, or a --format's text). Written to "<final>.tmp.<pid>"
// and renamed into place only when complete, so a killed run never leaves a
// partial result under the final name. Owned by the batch driver, one per file.
#pragma once

#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace corepool {

// Directories whose renames are not durable yet: each is fsynced once by
// sync(), however many renames it saw (0.1-0.15 ms each on this VM's ext4,
// AMD EPYC Zen 5). add_parent_of() may be called from several threads at once.
class DirectorySyncs {
 public:
  // The directory that holds `path` (".": the current one).
  void add_parent_of(const std::string& path);
  // Fsyncs every directory added since the last sync, once each; best effort,
  // as for a single commit.
  void sync();
  size_t pending();

 private:
  std::mutex mu_;
  std::set<std::string> dirs_;
};

class ResultFile {
 public:
  // Creates parent directories and opens the temporary file. Throws
  // std::runtime_error("<path>: cannot create result file: <strerror>").
  explicit ResultFile(std::string final_path);
  // Not committed: removes the temporary file.
  ~ResultFile();
  ResultFile(const ResultFile&) = delete;
  ResultFile& operator=(const ResultFile&) = delete;

  // Appends one JSON object as one line. Throws std::runtime_error if the write
  // fails, std::logic_error after commit() or abandon().
  void write_line(const nlohmann::json& line);
  // Appends text as it is (the other formats' lines, output_format.h); same throws.
  void write_text(const std::string& text);
  // Flushes, fsyncs, renames to the final path, then fsyncs its directory, or
  // with `later` leaves that to later.sync(). Throws std::runtime_error on
  // failure (the temporary file is then removed), std::logic_error if the file
  // was already committed or abandoned.
  void commit(DirectorySyncs* later = nullptr);
  // Drops the temporary file (also done by the destructor if not committed).
  // Does nothing after commit() or a previous abandon().
  void abandon();

  const std::string& final_path() const { return final_path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  std::string final_path_;
  std::string temp_path_;
  // kOpen: file_ is open and temp_path_ is ours. kCommitted: renamed into
  // place, nothing of ours is left to clean. kAbandoned: temp file removed.
  enum class State { kOpen, kCommitted, kAbandoned };
  std::FILE* file_ = nullptr;
  State state_ = State::kOpen;

  void require_open(const char* operation) const;
  [[noreturn]] void fail(const std::string& what);
};

// Result files written in full, committed together. The batch drivers'
// committer adds each finished result and commits the group when its queue
// runs empty (or kMaxFiles wait): each file's fsync and rename then run on up
// to kThreads threads side by side, and each directory is fsynced once. Every
// file of a run of equal files finishes in the same last calls, and their
// commits one after the other made the run's tail: 200 results of 3 s, 0.23 ms
// of fsync and 0.1 ms of rename each, 70-75 ms after the last file was scored
// against 0-1.5 ms with the events on standard output (AMD EPYC Zen 4 VM,
// ext4); side by side the filesystem's journal takes many fsyncs in one
// commit. A group under kParallelFrom files commits on the calling thread:
// files that finish a few at a time (the stateless driver's) made groups of
// 1-6, and starting threads for each cost more than it saved. Used by one
// thread at a time.
class CommitGroup {
 public:
  // Runs once the file is renamed into place (error "") or has failed (what
  // went wrong, "<final path>: ...": its temporary file is removed).
  using Done = std::function<void(const std::string& error)>;
  static constexpr size_t kMaxFiles = 256;  // open result files a group holds at most
  static constexpr int kThreads = 8;        // fsyncs and renames at once
  static constexpr size_t kParallelFrom = 16;  // files in a group that commit side by side

  // `file` must stay alive until `done` has run.
  void add(ResultFile& file, Done done);
  // Commits every file added (ResultFile::commit with the directory syncs
  // deferred), then fsyncs their directories once each, then runs the dones
  // in the order the files were added. Nothing if the group is empty.
  void commit();
  size_t size() const { return files_.size(); }

 private:
  struct Added {
    ResultFile* file;
    Done done;
    std::string error;
  };
  std::vector<Added> files_;
  DirectorySyncs dirs_;
};

// True if `path` exists and its last non-blank line is a JSON object with a
// "summary" key: the mark that a result was written in full. Reads only the
// end of the file; a last line over 16 MiB counts as incomplete.
bool result_is_complete(const std::string& path);

// True if `path` is a regular file: the mark of a complete result in the
// formats without a summary line (output_format.h), which only ever appear
// under their final name once written in full.
bool result_file_exists(const std::string& path);

// The "summary" object of a complete result, nullopt if the result is not
// complete (same test as result_is_complete). Used by `corepool merge`.
std::optional<nlohmann::json> result_summary(const std::string& path);

// Removes "<dir>/**/*.tmp.<pid>" left by runs whose pid is no longer alive.
// Returns how many were removed (0 if `dir` does not exist). With `owned`,
// only temp files whose final path relative to `dir` ("sub/a.wav.jsonl") it
// accepts: shards sharing one directory from several hosts, where a pid says
// nothing about another host's processes, each sweep only their own results.
int sweep_stale_temp_files(const std::string& dir,
                           const std::function<bool(const std::string&)>& owned = {});

}  // namespace corepool
