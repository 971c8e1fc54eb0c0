// `corepool bench`: every performance figure is a ratio measured in one run on
// the same machine against a reference. The sweep runs each measurement point
// as a fresh child process of this binary (`bench --point KIND ...`), so that
// process-global settings (LibTorch's thread pools, the allocator) and fork
// safety are clean for every point, and interleaves the points across repeats
// so that drift hits every configuration alike.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "supervisor/bench/bench_types.h"
#include "worker/exit_codes.h"

namespace corepool {

// `corepool bench` after main()'s startup: completes `options` from the
// effective config (model, workers, max batch; pinning only if both --pin and
// engine.pin_threads allow it) and runs one point (--point) or the sweep.
ExitCode run_bench_command(BenchOptions options, const Config& config);

// Orchestrates, writes results and plots, prints a verdict.
ExitCode run_bench(const BenchOptions& options);

// True, with one error line naming `command` and where such a model's speed
// is measured, when `model_dir` holds a stateful model: bench and tune time
// one item per forward(), which a stateful model's method does not take (a
// model.toml that does not load is left to the command, which reports it).
bool refuse_stateful_model(const std::string& command, const std::string& model_dir);

// Runs `point` as a child process over `audio` (a point's JSON, see bench_point.cc).
nlohmann::json run_point_child(const BenchOptions& options, const SweepPoint& point, const std::string& audio);

// One point in this process; prints its JSON on stdout. `engine` is the
// effective config (thread counts already applied by main()).
ExitCode run_bench_point(const BenchOptions& options, const Config& engine);

// Memory and respawn points (bench_memory.cc).
// Both plan the engine from `engine` as the service does (engine.optimize, the
// measured batch); the naive memory point holds no copy of the weights.
ExitCode run_memory_point(const BenchOptions& options, const Config& engine);
ExitCode run_respawn_point(const BenchOptions& options, const Config& engine);
ExitCode run_memory_bench(const BenchOptions& options);

// bf16 against fp32 (engine.optimize = onednn): label agreement and the
// largest score difference on held-out audio (bench_agreement.cc).
ExitCode run_bf16_agreement(const BenchOptions& options);

// Runs this binary with `args`; returns its stdout. Throws on a non-zero exit.
std::string run_self(const std::vector<std::string>& args);

}  // namespace corepool
