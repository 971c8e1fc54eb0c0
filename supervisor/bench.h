// `corepool bench`: every performance figure is a ratio measured in one run on
// the same machine against a reference. The orchestrator runs each measurement
// point as a fresh child process of this binary (`bench --point KIND ...`), so
// that process-global settings (LibTorch thread counts) and fork safety are
// clean for every point, and interleaves the points across repeats so that
// drift hits every configuration alike.
#pragma once

#include <string>
#include <vector>

namespace corepool {

struct BenchOptions {
  std::string model_dir;
  int workers = 0;             // 0 = usable cpus
  int max_batch = 4;
  double audio_seconds = 300;  // length of the generated input file
  int repeats = 3;             // interleaved repetitions; medians are reported
  bool pin = true;
  std::vector<std::string> modes = {"thread", "process"};
  // Memory comparison (shared weights vs a private copy per worker).
  bool memory = false;
  std::vector<int> worker_counts = {1, 2, 4, 8};
  // Respawn latency: SIGKILL of a worker to its replacement answering.
  bool respawn = false;
  // Internal: run one measurement point and print it as one JSON line.
  std::string point;           // ceiling-threads | thread | ceiling-processes | process | memory | respawn
  std::string audio;           // input file of a throughput point
  bool naive = false;          // memory point: each worker loads its own copy
};

// Orchestrates, prints tables and a verdict; returns a process exit code.
int run_bench(const BenchOptions& options);

// One point in this process; prints {"kind":..., ...} on stdout.
int run_bench_point(const BenchOptions& options);

// Memory and respawn points (bench_memory.cc).
int run_memory_point(const BenchOptions& options);
int run_respawn_point(const BenchOptions& options);
int run_memory_bench(const BenchOptions& options);


// Runs this binary with `args`; returns its stdout. Throws on a non-zero exit.
std::string run_self(const std::vector<std::string>& args);

}  // namespace corepool
