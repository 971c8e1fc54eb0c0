// `corepool merge`: one summary over the results that the shards of a batch
// wrote into one output directory (files, audio hours, segments, events), and
// the inputs that have no complete result: failed (with the shard's error) or
// unfinished (no shard got to them). Reads only; never loads the model.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "supervisor/batch/inputs.h"
#include "worker/exit_codes.h"

namespace corepool {

struct MergeOptions {
  std::string out_dir;             // where the shards wrote their results
  std::vector<std::string> paths;  // the batch's inputs, as given to every shard
  std::string manifest;            // or its manifest (and --root)
  std::string root;
};

struct MergeSummary {
  size_t inputs = 0;
  size_t complete = 0;
  double audio_seconds = 0;
  uint64_t segments = 0;
  uint64_t events = 0;
  size_t shard_reports = 0;
  std::vector<InputError> failed;      // key "" for a whole argument
  std::vector<std::string> unfinished;  // result keys
  std::vector<std::string> problems;    // unreadable shard reports
  int exit_code() const {
    return exit_status(failed.empty() && unfinished.empty() ? ExitCode::kOk : ExitCode::kMergeIncomplete);
  }
  nlohmann::json to_json() const;
};

// Throws ManifestError for an unusable manifest.
MergeSummary merge_results(const MergeOptions& options);

// Prints the summary as one JSON line on `out` and one line per failed or
// unfinished input on `err`. Returns kOk when all are complete, else kMergeIncomplete.
ExitCode print_merge(const MergeSummary& summary, const std::string& out_dir, std::FILE* out, std::FILE* err);

}  // namespace corepool
