// The plan cache: what planning measured (the Winograd items per call of each
// layer, the batch calibration) kept on disk, so that the next start of the
// same model on the same CPU with the same libraries skips the measuring.
// One JSON file per key in the cache directory: engine.plan_cache, by default
// $CACHE_DIRECTORY (systemd's CacheDirectory=), else $XDG_CACHE_HOME/corepool,
// else ~/.cache/corepool. A changed model file, CPU, LibTorch or corepool
// binary, or a different optimize / kernels / mode / batch limit, is another
// key; `--replan` measures anew and replaces the entry. Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "worker/calibrate.h"

namespace corepool {

struct PlanKey {
  std::string text;  // every input of the key, one per line (kept in the file, compared on read)
  std::string file_name() const;  // "plan-<16 hex digits>.json", from a hash of `text`
};

// What the key is made of; the caller fills the engine's request.
struct PlanKeyInputs {
  std::string model_dir;     // model.pt and model.toml are hashed by content
  std::string optimize, kernels;
  bool shared = false;       // process mode's weight arena
  int limit = 0;             // the largest batch allowed
  int max_batch = 0;         // engine.max_batch (0 = measured)
  std::string libraries;     // e.g. "libtorch 1.13.0"
  int engines = 1;           // engines busy during the calibration (calibrate_batch)
};

// Reads the model's files, /proc/cpuinfo and /proc/self/exe. Throws
// std::runtime_error naming a model file it cannot read.
PlanKey plan_key(const PlanKeyInputs& in);

struct CachedPlan {
  std::vector<int64_t> winograd_chunks;  // per layer, as OptimizeOutcome reports them
  bool measured_batch = false;           // calibration holds a measured batch
  Calibration calibration;
  std::string planned_at;                // UTC, ISO 8601, when it was measured
};

// engine.plan_cache's default directory; "" when no environment names one.
std::string default_plan_cache_dir();

// The plan stored under `key` in `dir`; nullopt when there is none, or it is
// unreadable, malformed or for another key (why goes to `why`).
std::optional<CachedPlan> read_plan(const std::string& dir, const PlanKey& key, std::string* why = nullptr);

// Writes atomically (temp file, rename), creating `dir`. Returns "" or why it
// could not (the caller warns; a start never fails for want of a cache).
std::string write_plan(const std::string& dir, const PlanKey& key, const CachedPlan& plan);

}  // namespace corepool
