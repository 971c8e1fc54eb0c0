// One input's output in the run's --format: its events and, for JSON Lines
// and timeline, its summary line, into its ResultFile (--out DIR) or onto
// standard output (--out -), each line flushed there as it is written so a
// pipe reader sees every event when it closes. Owned by the batch driver's
// FileJob; called under the driver's lock (events) or by its committer (summary).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "audio/events.h"
#include "supervisor/batch/output_format.h"
#include "supervisor/batch/result_file.h"

namespace corepool {

// What every writer of one run shares.
struct OutputSpec {
  OutputFormat format = OutputFormat::kJsonl;
  double high_freq_hz = 0;  // raven's High Freq: the model's Nyquist frequency
  // Raven rows on standard output, numbered across the run: the printed table
  // is one table. A result file numbers its own rows from 1.
  std::atomic<uint64_t> stdout_selections{0};
};

class ResultWriter {
 public:
  // `out` null: standard output. A result file gets its format's header now;
  // standard output gets it once per run (print_stdout_header()).
  ResultWriter(OutputSpec& spec, std::string file, std::string path, std::unique_ptr<ResultFile> out);

  void event(const Event& e);
  // JSON Lines and timeline only: the summary line; the other formats have none.
  void summary(nlohmann::json summary);
  // A result file joins `group`, which runs `done` once it has committed it;
  // standard output has nothing to commit: `done("")` runs now.
  void commit(CommitGroup& group, CommitGroup::Done done);
  // Drops a result file's temporary file; nothing for standard output.
  void abandon();

 private:
  void write(nlohmann::json line);
  void write_text(const std::string& text);

  OutputSpec& spec_;
  EventRow row_;
  std::unique_ptr<ResultFile> out_;
  uint64_t selections_ = 0;  // raven rows of this result file
};

// The format's header on standard output, if it has one: once, before any input.
void print_stdout_header(OutputFormat format);

}  // namespace corepool
