// The sweep: every configuration the options name, each point a fresh child
// process, interleaved across repeats (and in reverse order every other
// repeat) so that drift and position hit every configuration alike. Ends with
// results.csv, results.json, the plots and a verdict (bench_report.h).
#include "supervisor/bench/bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "config/model_config.h"
#include "supervisor/bench/bench_report.h"
#include "supervisor/bench/core_peak.h"
#include "tools/audio_synth.h"
#include "worker/host/cpus.h"
#include "worker/model/model.h"

namespace corepool {
namespace {

using nlohmann::json;

std::vector<int> unique_sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::vector<int> default_worker_counts(int usable, bool quick) {
  if (quick) return unique_sorted({1, usable, 2 * usable});
  std::vector<int> v;
  for (int n = 1; n <= 2 * usable; ++n) v.push_back(n);
  return v;
}

std::vector<int> default_intra_ops(int usable, bool quick) {
  return unique_sorted(quick ? std::vector<int>{1, std::max(2, usable)} : std::vector<int>{1, 2, usable});
}

// What a kind runs besides the configured engine: `plain` is the engine before
// issue 15 (no optimization, 4 segments per forward), `bf16` the bf16 path at
// the configured batch; every other kind the configured optimize and batch.
// A child's log level. Where bf16 is emulated the sweep says so once
// (bench_types.h); each bf16 child would say it again, twice (plan, pipeline).
std::string child_log_level(const std::string& optimize) {
  return optimize == "bf16" && native_bf16_isa().empty() ? "error" : "warn";
}

SweepPoint kind_point(const std::string& kind, int n, int intra, const std::string& alloc) {
  SweepPoint p;
  p.kind = kind;
  p.workers = n;
  p.intra_op = intra;
  p.allocator = alloc;
  if (kind == "plain") {
    p.optimize = "none";
    p.max_batch = 4;
  } else if (kind == "bf16") {
    p.optimize = "bf16";
  }
  return p;
}

// The grid. LibTorch's defaults have one intra-op setting (its own). --quick
// keeps what its plots draw: intra-op settings in one process (thread mode and
// its ceiling, the field's figure), processes at intra-op 1, and the
// allocators compared at the point the memory plot shows.
std::vector<SweepPoint> sweep_grid(const BenchOptions& o, int usable, const std::string& bf16_isa) {
  auto kinds = o.modes.empty() ? kBenchKinds : o.modes;
  if (quick_bench_skips_bf16(o, bf16_isa)) kinds.erase(std::find(kinds.begin(), kinds.end(), "bf16"));
  const auto counts = o.worker_counts.empty() ? default_worker_counts(usable, o.quick) : o.worker_counts;
  const auto intras = o.intra_ops.empty() ? default_intra_ops(usable, o.quick) : o.intra_ops;
  const bool pick_allocators = !o.allocators.empty();
  const std::vector<std::string> allocators =
      pick_allocators ? o.allocators : std::vector<std::string>{"jemalloc", "system"};
  std::vector<SweepPoint> grid;
  for (const auto& alloc : allocators) {
    for (const auto& kind : kinds) {
      for (int n : counts) {
        // plain and bf16 are references for the verdict's ratios: intra-op 1 only.
        const bool reference = kind == "plain" || kind == "bf16";
        for (int intra : kind == "defaults" ? std::vector<int>{0} : reference ? std::vector<int>{1} : intras) {
          const bool memory_point = (kind == "thread" || kind == "process") && intra == 1 && n == usable;
          const bool processes = kind == "process" || kind == "ceiling-processes";
          if (o.quick && o.intra_ops.empty() && processes && intra != 1) continue;
          if (o.quick && !pick_allocators && alloc != "jemalloc" && !memory_point) continue;
          grid.push_back(kind_point(kind, n, intra, alloc));
        }
      }
    }
  }
  return grid;
}

// The table, the files, the plots and the verdict of a finished sweep.
void report(const std::string& dir, const json& host, const std::vector<PointSummary>& points) {
  const int usable = host.at("usable_cpus");
  print_summary_table(points);
  Roofline roofline;
  if (const auto r = host.find("roofline"); r != host.end()) {
    roofline.flop_per_segment = r->value("flop_per_segment", 0.0);
    roofline.fp32_gflops = r->value("fp32_gflops", 0.0);
    roofline.fp32_isa = r->value("fp32_isa", std::string());
    roofline.bf16_gflops = r->value("bf16_gflops", 0.0);
    roofline.bf16_isa = r->value("bf16_isa", std::string());
  }
  const auto lines = verdict(points, usable, roofline);
  write_csv(dir + "/results.csv", points);
  write_json(dir + "/results.json", host, points, lines);
  const auto pngs = write_plots(dir, points, host.at("audio_seconds"), usable);
  std::printf("\nOn this host (%d usable cpus):\n", usable);
  for (const auto& l : lines) std::printf("  - %s\n", l.c_str());
  std::printf("\nwrote %s/results.csv, %s/results.json", dir.c_str(), dir.c_str());
  for (const auto& png : pngs) std::printf(", %s", png.c_str());
  std::printf("\n");
}

// engine.max_batch = 0 is measured once per engine.optimize value here, in a
// child of its own, and every point of that value runs at the result: points
// that calibrated each for themselves would differ by the calibration's noise
// (a ceiling at a worse batch than its pipeline is no ceiling). The same holds
// for onednn's Winograd chunk sizes (optimize.h): measured in each point, they
// came out different from one process to the next.
void resolve_plans(const BenchOptions& o, std::vector<SweepPoint>& grid) {
  std::map<std::string, json> plans;
  for (auto& p : grid) {
    const std::string optimize = p.optimize.empty() ? o.optimize : p.optimize;
    const bool batch_measured = p.max_batch < 0 && o.max_batch == 0;
    if (!batch_measured && optimize != "onednn") continue;  // nothing to measure once
    if (!plans.count(optimize)) {
      plans[optimize] = json::parse(run_self({"--log-level", child_log_level(optimize), "bench", "--point", "plan",
                                              "--model", o.model_dir, "--optimize", optimize, "--kernels",
                                              o.kernels, "--max-batch", std::to_string(o.max_batch)}));
      std::printf("  measured once for every %s point: %s\n", optimize.c_str(),
                  plans[optimize]["plan"].get<std::string>().c_str());
    }
    const json& plan = plans[optimize];
    if (batch_measured) p.max_batch = plan["batch"];
    p.winograd_chunks = fmt::format("{}", fmt::join(plan["winograd_chunks"].get<std::vector<int64_t>>(), ","));
  }
}

ExitCode replot(const BenchOptions& o) {
  json host;
  const auto points = read_json(o.out_dir + "/results.json", &host);
  report(o.out_dir, host, points);
  return ExitCode::kOk;
}

}  // namespace

json run_point_child(const BenchOptions& o, const SweepPoint& p, const std::string& audio) {
  const std::string optimize = p.optimize.empty() ? o.optimize : p.optimize;
  std::vector<std::string> args{
      "--log-level", child_log_level(optimize), "--allocator", p.allocator, "bench", "--point", p.kind, "--audio", audio,
      "--model", o.model_dir, "--workers", std::to_string(p.workers), "--intra-op-threads",
      std::to_string(p.intra_op), "--inter-op-threads", p.kind == "defaults" ? "0" : "1", "--max-batch",
      std::to_string(p.max_batch >= 0 ? p.max_batch : o.max_batch), "--optimize",
      optimize, "--kernels", o.kernels, o.pin ? "--pin" : "--no-pin"};
  if (!p.winograd_chunks.empty()) {
    args.push_back("--winograd-chunks");
    args.push_back(p.winograd_chunks);
  }
  json j = json::parse(run_self(args));
  if (j["allocator"] != p.allocator) {
    throw std::runtime_error("bench: point " + p.label() + " ran on " + j["allocator"].get<std::string>() +
                             " (the allocator switch did not take)");
  }
  return j;
}

std::string run_self(const std::vector<std::string>& args) {
  // Resolved here: inside popen's shell, /proc/self/exe would be the shell.
  std::string cmd = std::filesystem::read_symlink("/proc/self/exe").string();
  for (const auto& a : args) cmd += " '" + a + "'";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("bench: cannot run " + cmd);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  if (status != 0) throw std::runtime_error("bench: point failed (" + cmd + ")");
  return out;
}

bool refuse_stateful_model(const std::string& command, const std::string& model_dir) {
  bool stateful = false;
  try {
    stateful = load_model_config(model_dir + "/model.toml").is_stateful();
  } catch (const std::exception&) {
    return false;
  }
  if (stateful) {
    spdlog::error("{}: {} is a stateful model (model.toml [stateful]); {} measures stateless models. "
                  "Measure it with `corepool batch --model {} FILES` (its x real time), as bench/silero-bench.sh does",
                  command, model_dir, command, model_dir);
  }
  return stateful;
}

ExitCode run_bench_command(BenchOptions o, const Config& config) {
  o.model_dir = config.model_dir;
  o.workers = config.workers;
  o.max_batch = config.max_batch;
  o.optimize = config.optimize;
  o.kernels = config.kernels;
  o.pin = config.pin_threads && o.pin;
  if (!o.point.empty()) return run_bench_point(o, config);
  // Every point runs one item per segment through forward(); a stateful
  // model's method takes a chunk and its stream's state. Its throughput is
  // measured by `corepool batch` itself (bench/silero-bench.sh, beside its bare
  // ceiling): refused here in one line, not with LibTorch's stack trace.
  if (refuse_stateful_model("bench", o.model_dir)) return ExitCode::kUsage;
  return run_bench(o);
}

ExitCode run_bench(const BenchOptions& o) {
  if (o.memory) return run_memory_bench(o);
  if (o.bf16_agreement) return run_bf16_agreement(o);
  if (o.replot) return replot(o);
  const auto started = std::chrono::steady_clock::now();
  auto model = load_model(o.model_dir);  // fails early, with the model error, if unusable
  const CpuBudget budget = usable_cpus();
  std::filesystem::create_directories(o.out_dir);
  char tmpl[] = "/tmp/corepool-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("bench: cannot create a temp dir");
  const std::string audio = std::string(tmpl) + "/bench.wav";
  const synth::FileSpec spec = synth::demo_of_seconds(o.audio_seconds, model->config.sample_rate);
  synth::write_audio(audio, spec);

  const std::string bf16_isa = native_bf16_isa();
  std::vector<SweepPoint> grid = sweep_grid(o, budget.usable, bf16_isa);
  std::printf("corepool bench: model %s, %d usable cpu(s), optimize %s, max batch %s, %.0f s of audio, %zu "
              "configurations x %d repeat(s)\n", o.model_dir.c_str(), budget.usable, o.optimize.c_str(),
              o.max_batch == 0 ? "measured" : std::to_string(o.max_batch).c_str(), synth::duration_seconds(spec),
              grid.size(), o.repeats);
  const bool bf16_points = std::any_of(grid.begin(), grid.end(), [&](const SweepPoint& p) {
    return (p.optimize.empty() ? o.optimize : p.optimize) == "bf16";
  });
  if (quick_bench_skips_bf16(o, bf16_isa)) {
    std::printf("  %s\n", bf16_skipped_note("--modes bf16 or --optimize bf16").c_str());
  } else if (bf16_points && bf16_isa.empty()) {
    std::printf("  %s\n", bf16_emulated_note().c_str());
  }
  resolve_plans(o, grid);
  json roofline = json::parse(run_self({"--log-level", "warn", "bench", "--point", "roofline", "--model", o.model_dir}));
  roofline.erase("kind");
  std::vector<std::vector<json>> runs(grid.size());
  for (int r = 0; r < o.repeats; ++r) {
    for (size_t k = 0; k < grid.size(); ++k) {
      const size_t i = r % 2 == 0 ? k : grid.size() - 1 - k;
      runs[i].push_back(run_point_child(o, grid[i], audio));
      const json& j = runs[i].back();
      const auto chunks = j.value("winograd_chunks", std::vector<int64_t>{});
      std::printf("  repeat %d  %-34s %8.2f s %8.1f segments/s  %s batch %d%s\n", r + 1, grid[i].label().c_str(),
                  j["seconds"].get<double>(), j["segments"].get<double>() / j["seconds"].get<double>(),
                  j.value("optimize", std::string("?")).c_str(), j.value("batch", 0),
                  chunks.empty() ? "" : fmt::format(" items per call {}", fmt::join(chunks, ",")).c_str());
      std::fflush(stdout);
    }
  }
  std::filesystem::remove_all(tmpl);

  std::vector<PointSummary> points;
  for (size_t i = 0; i < grid.size(); ++i) points.push_back(summarize(grid[i], runs[i], model->config.hop_seconds));
  const json host = {{"usable_cpus", budget.usable}, {"model", o.model_dir}, {"max_batch", o.max_batch}, {"optimize", o.optimize},
                     {"audio_seconds", synth::duration_seconds(spec)}, {"repeats", o.repeats}, {"roofline", roofline},
                     {"latency", "pipeline kinds: one segment, submit to result, 2 x workers x batch in flight; "
                                 "ceilings: forward() of one batch"}};
  report(o.out_dir, host, points);
  std::printf("bench took %.0f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return ExitCode::kOk;
}

}  // namespace corepool
