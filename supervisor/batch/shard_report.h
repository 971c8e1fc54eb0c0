// What one shard of a sharded batch did, kept next to its results in
// "<out>/.corepool-shards/<I>-of-<N>.json" so that `corepool merge` can tell
// a failed input (and why) from one that no shard reached. Written by the batch
// command at the end of a sharded run (a rerun replaces it), read by merge.
#pragma once

#include <string>
#include <vector>

#include "supervisor/batch/inputs.h"
#include "supervisor/batch/shard.h"

namespace corepool {

inline constexpr const char* kShardReportDir = ".corepool-shards";

struct ShardReport {
  uint32_t index = 0;
  uint32_t count = 1;
  std::string host;
  size_t inputs = 0;   // inputs of this shard
  size_t done = 0;     // results written by this run
  size_t skipped = 0;  // results already complete
  double audio_seconds = 0;
  double wall_seconds = 0;
  std::vector<InputError> failures;  // keyed by result; key "" for a whole argument
};

// Atomically (temp file + rename). Throws std::runtime_error naming the path.
void write_shard_report(const std::string& out_dir, const ShardReport& report);

// Every report under out_dir; unreadable or malformed ones are named in
// `problems` and skipped.
std::vector<ShardReport> read_shard_reports(const std::string& out_dir, std::vector<std::string>& problems);

}  // namespace corepool
