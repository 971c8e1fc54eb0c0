// The vocabulary of `corepool bench` and `corepool tune`: the kinds of
// measurement point, the options of a sweep, one configuration of it and the
// summary of its repeats. Plain values shared by the sweep (bench.h), the
// report (bench_report.h) and the command line (supervisor/cli.h); no LibTorch.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace corepool {

// The kinds of point, as `--modes` names them.
//   ceiling-threads / ceiling-processes: N pinned tight forward() loops on
//     precomputed features, no pipeline, no IPC (the bare ceiling);
//   thread / process: the full pipeline (decode, segment, features, forward)
//     through thread mode or process mode;
//   defaults: thread mode with LibTorch's global pools at their default size,
//     as an engine that never configures them runs;
//   plain: thread mode with engine.optimize = none and max_batch 4, the engine
//     and defaults before issue 15: the reference the gains are measured against;
//   bf16: thread mode with engine.optimize = bf16 at the measured batch.
// Every other kind runs the configured engine.optimize and max_batch
// (default: onednn, measured).
extern const std::vector<std::string> kBenchKinds;

struct BenchOptions {
  std::string model_dir;
  int workers = 0;             // a point's engine threads / workers (0 = usable cpus)
  int max_batch = 0;           // engine.max_batch of the non-plain kinds (0 = measured)
  std::string optimize = "onednn";  // engine.optimize of the non-plain kinds
  std::string kernels = "auto";     // engine.kernels of every kind
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
  std::string winograd_chunks; // throughput point: items per Winograd call, per layer ("2,2,8"; "" = measured)
  bool bf16_agreement = false; // report bf16 vs fp32 label agreement and score differences
};

// One configuration of the sweep.
struct SweepPoint {
  std::string kind;
  int workers = 1;
  int intra_op = 1;  // 0 = LibTorch's default
  std::string allocator = "jemalloc";
  int max_batch = -1;        // -1 = BenchOptions::max_batch (0 there = measured)
  std::string optimize = "";  // "" = BenchOptions::optimize
  std::string winograd_chunks{};  // measured once per optimize value (bench.cc); "" = the point measures its own
  std::string label() const;  // "thread w2 intra 1 jemalloc"
};

// One configuration over its repeats (bench_summary.h makes it).
struct PointSummary {
  SweepPoint point;
  int runs = 0;
  double segments = 0;
  double seconds = 0, seconds_min = 0, seconds_max = 0, spread = 0;  // processing time; spread = (max-min)/median
  double rate = 0;         // segments per second (median)
  double x_real_time = 0;  // seconds of audio per second
  double p50_ms = 0, p95_ms = 0, p99_ms = 0;
  double cpu_util = 0;     // share of the usable cpus, 0..1
  double voluntary = 0, involuntary = 0;  // context switches per run
  double rss_peak_mb = 0, rss_avg_mb = 0, pss_peak_mb = 0, pss_avg_mb = 0;
  nlohmann::json memory;   // [[seconds, rss_kb, pss_kb], ...] of the median run
  nlohmann::json jemalloc; // {"allocated": bytes, ...} of the point's own process, median run; {} on glibc
  int batch = 0;           // items per forward() the median run used (its plan's batch)
  std::string optimize;    // engine.optimize the median run applied
  // Segments per second of each run, in repeat order: the verdict sets a
  // mode's repeat r against its ceiling's repeat r, run next to it in time.
  std::vector<double> rates;
  // Pipeline kinds: ms per segment inside the engines (medians over runs),
  // and the rest of the engines' wall time; all 0 for the ceilings.
  struct Phases {
    double input_ms = 0, infer_ms = 0, output_ms = 0, other_ms = 0, mean_batch = 0;
  } phases;
};

// A point's "phases" as its JSON and results.json hold them: {} when there
// are none (mean_batch 0); phases_from_json gives zeros for {}.
nlohmann::json phases_to_json(const PointSummary::Phases& p);
PointSummary::Phases phases_from_json(const nlohmann::json& j);

// bf16 where the CPU has no bf16 unit (`bf16_isa` "", core_peak.h's
// native_bf16_isa()): oneDNN emulates it at 0.02-0.4x fp32's speed, and one
// bf16 point of CNN10 outlasts the rest of the sweep. `corepool tune` without
// --optimize and `corepool bench --quick` without --modes leave it out there,
// unless engine.optimize is bf16 (bench: --optimize bf16 or the config).
bool tune_skips_bf16(const std::vector<std::string>& asked_optimizes, const std::string& bf16_isa);
bool quick_bench_skips_bf16(const BenchOptions& o, const std::string& bf16_isa);
// The one line either prints when it leaves bf16 out, or when bf16 was asked
// for on such a CPU (its points then log nothing below an error: bench.cc).
std::string bf16_skipped_note(const std::string& how_to_ask);
std::string bf16_emulated_note();

}  // namespace corepool
