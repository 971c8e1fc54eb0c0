// Batch sharding: which 1/N of the inputs one `corepool batch` run processes.
// An input belongs to shard fnv1a64(key) % N, where key is its result name (the
// path relative to its input root), so every shard computes the same split
// from the same inputs, whatever the listing order or the machine. The shard
// comes from --shard I/N, else from Slurm's or Kubernetes' array variables.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace corepool {

// A bad --shard value or scheduler variable; the message names it.
class ShardError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ShardSpec {
  uint32_t index = 0;  // 0 .. count-1
  uint32_t count = 1;  // 1: the whole input set
  std::string source;  // where it came from, for logs: "--shard", "SLURM_ARRAY_TASK_ID", ...
  bool sharded() const { return count > 1; }
  bool owns(std::string_view key) const;
  std::string name() const { return std::to_string(index) + "/" + std::to_string(count); }
};

// FNV-1a, 64 bit, over the bytes of `bytes`: fixed by its definition, the same
// on every machine and in every version (std::hash is neither).
uint64_t fnv1a64(std::string_view bytes);

// The shard (0 .. count-1) that processes the input whose result key is `key`.
uint32_t shard_of(std::string_view key, uint32_t count);

// "I/N" with 0 <= I < N <= 1000000. Throws ShardError naming the value.
ShardSpec parse_shard(const std::string& text);

// Looks up an environment variable; nullopt when unset. Tests pass their own.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_environment();

// The shard of this run: --shard if given (non-empty `flag`); else index
// SLURM_ARRAY_TASK_ID (a job array submitted as --array=0-<N-1>); else
// JOB_COMPLETION_INDEX (a Kubernetes Indexed Job); else 0/1. The count is
// COREPOOL_SHARD_COUNT when set (rerunning one array task), else
// SLURM_ARRAY_TASK_COUNT; an Indexed Job must set COREPOOL_SHARD_COUNT.
// Throws ShardError naming the flag or variable that is wrong.
ShardSpec resolve_shard(const std::string& flag, const EnvLookup& env);

}  // namespace corepool
