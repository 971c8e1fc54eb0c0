// A full grid, pruned where workers x intra-op exceeds twice the usable cpus
// (oversubscribed by construction: the sweep of `corepool bench` shows what
// that costs). Latency is that of `corepool bench`'s pipeline points: one
// segment from submit to result with one batch running and one waiting per
// worker, the latency of a service kept at full throughput.
#include "supervisor/bench/tune.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "supervisor/bench/bench.h"
#include "supervisor/bench/bench_summary.h"
#include "supervisor/bench/core_peak.h"
#include "tools/audio_synth.h"
#include "worker/host/cpus.h"
#include "worker/model/model.h"

namespace corepool {
namespace {

std::vector<SweepPoint> tune_grid(const TuneOptions& o, int usable, int model_max_batch, const std::string& bf16_isa) {
  std::vector<int> counts = o.worker_counts, intras = o.intra_ops, batches = o.max_batches;
  if (counts.empty()) {
    for (int n = 1; n <= 2 * usable; ++n) counts.push_back(n);
  }
  if (intras.empty()) intras = {1, 2, usable};
  if (batches.empty()) batches = {1, 2, 4, 8, 16};
  std::vector<std::string> optimizes =
      o.optimizes.empty() ? std::vector<std::string>{"none", "onednn", "bf16"} : o.optimizes;
  if (tune_skips_bf16(o.optimizes, bf16_isa)) optimizes.pop_back();
  std::sort(intras.begin(), intras.end());
  intras.erase(std::unique(intras.begin(), intras.end()), intras.end());
  std::vector<SweepPoint> grid;
  for (int n : counts) {
    for (int intra : intras) {
      if (n * intra > 2 * usable && !(n == 1 && intra == 1)) continue;
      for (const auto& optimize : optimizes) {
        for (int b : batches) {
          if (b > model_max_batch) continue;
          SweepPoint p;
          p.kind = o.mode;
          p.workers = n;
          p.intra_op = intra;
          p.allocator = o.allocator;
          p.optimize = optimize;
          p.max_batch = b;
          grid.push_back(p);
        }
      }
    }
  }
  return grid;
}

std::string today() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::localtime(&t));
  return buf;
}

}  // namespace

ExitCode run_tune_command(TuneOptions o, const Config& config) {
  o.model_dir = config.model_dir;
  o.mode = config.mode;
  o.allocator = config.allocator;
  o.pin = config.pin_threads;
  // Its sweep ran one stream of the demo, so a batch never held more than one
  // chunk and the "best" max_batch it printed (4, for Silero) was noise.
  if (refuse_stateful_model("tune", o.model_dir)) return ExitCode::kUsage;
  return run_tune(o);
}

ExitCode run_tune(const TuneOptions& o) {
  auto model = load_model(o.model_dir);
  const int usable = usable_cpus().usable;
  char tmpl[] = "/tmp/corepool-tune-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("tune: cannot create a temp dir");
  const std::string audio = std::string(tmpl) + "/tune.wav";
  synth::write_audio(audio, synth::demo_of_seconds(o.audio_seconds, model->config.sample_rate));
  const std::string bf16_isa = native_bf16_isa();
  const auto grid = tune_grid(o, usable, model->config.max_batch, bf16_isa);
  std::printf("corepool tune: %s mode, %s, %d usable cpu(s), %zu configurations x %d repeat(s), %.0f s of audio "
              "each\n", o.mode.c_str(), o.allocator.c_str(), usable, grid.size(), o.repeats, o.audio_seconds);
  if (tune_skips_bf16(o.optimizes, bf16_isa)) {
    std::printf("%s\n", bf16_skipped_note("--optimize none,onednn,bf16").c_str());
  } else if (bf16_isa.empty() && std::count(o.optimizes.begin(), o.optimizes.end(), "bf16") > 0) {
    std::printf("%s\n", bf16_emulated_note().c_str());
  }
  BenchOptions bench;
  bench.model_dir = o.model_dir;
  bench.pin = o.pin;
  std::printf("\n%3s %5s %-6s %5s %10s %8s %10s\n", "w", "intra", "opt", "batch", "seg/s", "x-rt", "p99 ms");
  std::vector<PointSummary> results;
  for (const auto& p : grid) {
    std::vector<nlohmann::json> runs;
    for (int r = 0; r < o.repeats; ++r) runs.push_back(run_point_child(bench, p, audio));
    results.push_back(summarize(p, runs, model->config.hop_seconds));
    const auto& s = results.back();
    std::printf("%3d %5d %-6s %5d %10.1f %8.1f %10.1f\n", p.workers, p.intra_op, s.optimize.c_str(), p.max_batch,
                s.rate, s.x_real_time, s.p99_ms);
    std::fflush(stdout);
  }
  std::filesystem::remove_all(tmpl);
  const PointSummary* best = nullptr;
  for (const auto& s : results) {
    if (o.p99_ms > 0 && s.p99_ms > o.p99_ms) continue;
    if (!best || s.rate > best->rate) best = &s;
  }
  if (!best) {
    std::printf("\nno configuration keeps p99 under %g ms on this host; the lowest p99 measured is above it\n",
                o.p99_ms);
    return ExitCode::kNoConfigFits;
  }
  char bound[64] = "";
  if (o.p99_ms > 0) std::snprintf(bound, sizeof bound, " with p99 <= %g ms", o.p99_ms);
  std::printf("\n# corepool tune, %s, this host (%d usable cpus): best throughput%s\n", today().c_str(), usable, bound);
  std::printf("# measured %.1f segments/s (%.1fx real time), p99 %.1f ms per segment\n", best->rate,
              best->x_real_time, best->p99_ms);
  std::printf("[engine]\nmode = \"%s\"\nworkers = %d\nintra_op_threads = %d\noptimize = \"%s\"\nmax_batch = %d\n"
              "allocator = \"%s\"\n", o.mode.c_str(), best->point.workers, best->point.intra_op,
              best->point.optimize.c_str(), best->point.max_batch, o.allocator.c_str());
  return ExitCode::kOk;
}

}  // namespace corepool
