// `corepool tune`: measures the configured mode over workers x intra-op
// threads x engine.optimize x max batch on this host and prints the [engine] snippet of the best
// throughput, or of the best throughput whose p99 segment latency stays under
// a bound. Uses the benchmark's points (bench.h), one child process each.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "worker/exit_codes.h"

namespace corepool {

struct TuneOptions {
  std::string model_dir;
  std::string mode = "process";
  std::string allocator = "jemalloc";
  std::vector<int> worker_counts;  // empty: 1 .. 2 x usable cpus
  std::vector<int> intra_ops;      // empty: 1, 2, usable cpus
  std::vector<std::string> optimizes;  // engine.optimize values; empty: none, onednn, bf16 (bench_types.h)
  std::vector<int> max_batches;    // empty: 1, 2, 4, 8, 16 (within the model's limit)
  double p99_ms = 0;               // 0: no latency bound
  double audio_seconds = 30;
  int repeats = 1;
  bool pin = true;
};

// `corepool tune` after main()'s startup: takes the model, mode, allocator and
// pinning from the effective config, then runs the search.
ExitCode run_tune_command(TuneOptions options, const Config& config);

// Prints the table and the snippet; returns kOk, or kNoConfigFits when no
// configuration meets --p99-ms.
ExitCode run_tune(const TuneOptions& options);

}  // namespace corepool
