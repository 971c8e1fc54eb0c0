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

namespace corepool {

// The kinds of point, as `--modes` names them.
//   ceiling-threads / ceiling-processes: N pinned tight forward() loops on
//     precomputed features, no pipeline, no IPC (the bare ceiling);
//   thread / process: the full pipeline (decode, segment, features, forward)
//     through thread mode or process mode;
//   defaults: thread mode with LibTorch's global pools at their default size,
//     as an engine that never configures them runs.
extern const std::vector<std::string> kBenchKinds;

struct BenchOptions {
  std::string model_dir;
  int workers = 0;             // a point's engine threads / workers (0 = usable cpus)
  int max_batch = 4;
  double audio_seconds = 60;   // length of the generated input file
  int repeats = 3;             // interleaved repetitions; medians are reported
  bool quick = false;          // a small sweep that runs in under 3 minutes
  bool pin = true;
  std::vector<std::string> modes;       // empty: every kind
  std::vector<int> worker_counts;       // empty: 1 .. 2 x usable cpus (--memory: 1,2,4,8)
  std::vector<int> intra_ops;           // empty: 1, 2, usable cpus
  std::vector<std::string> allocators;  // empty: jemalloc, system
  std::string out_dir = "corepool-bench";  // results.csv, results.json, *.png
  bool replot = false;         // redraw plots and verdict from out_dir/results.json, measure nothing
  // Memory comparison (shared weights vs a private copy per worker).
  bool memory = false;
  // Respawn latency: SIGKILL of a worker to its replacement answering.
  bool respawn = false;
  // Internal: run one measurement point and print it as one JSON line.
  std::string point;           // a kind above, or memory | respawn
  std::string audio;           // input file of a throughput point
  bool naive = false;          // memory point: each worker loads its own copy
};

// One configuration of the sweep.
struct SweepPoint {
  std::string kind;
  int workers = 1;
  int intra_op = 1;  // 0 = LibTorch's default
  std::string allocator = "jemalloc";
  int max_batch = 0;  // 0 = BenchOptions::max_batch
  std::string label() const;  // "thread w2 intra 1 jemalloc"
};

// Orchestrates, writes results and plots, prints a verdict; returns an exit code.
int run_bench(const BenchOptions& options);

// Runs `point` as a child process over `audio` (a point's JSON, see bench_point.cc).
nlohmann::json run_point_child(const BenchOptions& options, const SweepPoint& point, const std::string& audio);

// One point in this process; prints its JSON on stdout. `engine` is the
// effective config (thread counts already applied by main()).
int run_bench_point(const BenchOptions& options, const Config& engine);

// Memory and respawn points (bench_memory.cc).
int run_memory_point(const BenchOptions& options);
int run_respawn_point(const BenchOptions& options);
int run_memory_bench(const BenchOptions& options);

// Runs this binary with `args`; returns its stdout. Throws on a non-zero exit.
std::string run_self(const std::vector<std::string>& args);

}  // namespace corepool
