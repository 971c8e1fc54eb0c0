// Shard arithmetic and the resolution of a run's shard from its flag or the
// scheduler's environment. No I/O beyond getenv; called by the batch command.
#include "supervisor/batch/shard.h"

#include <charconv>
#include <cstdlib>

namespace corepool {
namespace {

constexpr uint32_t kMaxShards = 1000000;

// A whole decimal number, nothing else (no sign, no blanks, no "0x").
std::optional<uint64_t> parse_count(std::string_view text) {
  uint64_t value = 0;
  if (text.empty() || text.size() > 18) return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

uint64_t number_from(const std::string& what, const std::string& text) {
  const auto value = parse_count(text);
  if (!value) throw ShardError(what + "='" + text + "': not a whole number");
  return *value;
}

ShardSpec checked(uint64_t index, uint64_t count, const std::string& index_name,
                  const std::string& count_name, std::string source) {
  if (count == 0 || count > kMaxShards) {
    throw ShardError(count_name + "=" + std::to_string(count) + ": the shard count must be 1.." +
                     std::to_string(kMaxShards));
  }
  if (index >= count) {
    throw ShardError(index_name + "=" + std::to_string(index) + ": the shard index must be below the count " +
                     std::to_string(count) + " (" + count_name + "); shards are numbered 0.." +
                     std::to_string(count - 1));
  }
  return {static_cast<uint32_t>(index), static_cast<uint32_t>(count), std::move(source)};
}

// The count for a scheduler index: COREPOOL_SHARD_COUNT wins over `fallback`.
ShardSpec from_scheduler(const EnvLookup& env, const std::string& index_var, const std::string& fallback) {
  const std::string index_text = *env(index_var);
  std::string count_var = "COREPOOL_SHARD_COUNT";
  std::optional<std::string> count_text = env(count_var);
  if (!count_text && !fallback.empty()) count_text = env(count_var = fallback);
  if (!count_text) {
    throw ShardError(index_var + " is set (" + index_text + ") but COREPOOL_SHARD_COUNT is not: set it to the " +
                     "number of shards (an Indexed Job's completions), or pass --shard I/N");
  }
  try {
    return checked(number_from(index_var, index_text), number_from(count_var, *count_text), index_var, count_var,
                   index_var);
  } catch (const ShardError& e) {
    if (index_var != "SLURM_ARRAY_TASK_ID") throw;
    throw ShardError(std::string(e.what()) + "; submit the array as --array=0-<N-1>");
  }
}

}  // namespace

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;  // offset basis
  for (const unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;  // FNV prime
  }
  return hash;
}

uint32_t shard_of(std::string_view key, uint32_t count) {
  return static_cast<uint32_t>(fnv1a64(key) % (count == 0 ? 1 : count));
}

bool ShardSpec::owns(std::string_view key) const { return shard_of(key, count) == index; }

ShardSpec parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  const std::string what = "--shard '" + text + "'";
  if (slash == std::string::npos) throw ShardError(what + ": expected I/N, e.g. 0/4 (shards are numbered from 0)");
  const auto index = parse_count(std::string_view(text).substr(0, slash));
  const auto count = parse_count(std::string_view(text).substr(slash + 1));
  if (!index || !count) throw ShardError(what + ": expected I/N with whole numbers, e.g. 0/4");
  if (*count == 0 || *count > kMaxShards) {
    throw ShardError(what + ": the shard count must be 1.." + std::to_string(kMaxShards));
  }
  if (*index >= *count) {
    throw ShardError(what + ": the shard index must be below the count; shards are numbered 0.." +
                     std::to_string(*count - 1));
  }
  return {static_cast<uint32_t>(*index), static_cast<uint32_t>(*count), "--shard"};
}

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

ShardSpec resolve_shard(const std::string& flag, const EnvLookup& env) {
  if (!flag.empty()) return parse_shard(flag);
  if (env("SLURM_ARRAY_TASK_ID")) return from_scheduler(env, "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT");
  if (env("JOB_COMPLETION_INDEX")) return from_scheduler(env, "JOB_COMPLETION_INDEX", "");
  return {};
}

}  // namespace corepool
