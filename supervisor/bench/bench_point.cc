// One measurement point of `corepool bench`, run in its own process. Every
// point plans its engine as the service would (engine.optimize, the batch
// measured when engine.max_batch is 0) and reports the batch it used; the
// clock starts once the engines are built and warmed up, and stops when the
// last segment is done. Besides throughput, a point reports latency, CPU use,
// context switches and memory (ResourceProbe):
//   - the pipeline kinds time each segment from submit() to its result, with
//     at most 2 x workers x batch segments in flight (one batch running
//     and one waiting per worker: the latency a saturated service gives);
//   - the ceilings (bench_ceiling.h) time each forward() call of one batch.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>

#include "supervisor/pool/allocator.h"
#include "supervisor/batch/batch.h"
#include "supervisor/bench/bench.h"
#include "supervisor/bench/bench_ceiling.h"
#include "supervisor/bench/core_peak.h"
#include "supervisor/bench/model_flops.h"
#include "supervisor/bench/bench_stats.h"
#include "supervisor/pool/executor_factory.h"
#include "supervisor/pool/process_pool.h"
#include "supervisor/bench/resource_probe.h"
#include "audio/audio_stream.h"
#include "worker/host/cpus.h"
#include "worker/engine_plan.h"
#include "worker/runtime.h"
#include "worker/kernels/winograd_conv.h"
#include "audio/segmenter.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// The first `count` segments of the file (the ceiling's fixed inputs) and the
// total number of segments the pipeline will produce from it.
std::vector<std::vector<float>> read_segments(const std::string& path, const ModelConfig& cfg, size_t count,
                                              uint64_t* total) {
  AudioStream stream(path, cfg.sample_rate);
  Segmenter segmenter(cfg.segment_samples(), cfg.hop_samples());
  std::vector<std::vector<float>> out;
  std::vector<float> block;
  Segment s;
  while (stream.read(block)) {
    segmenter.push(block.data(), block.size());
    block.clear();
    while (segmenter.next(s)) {
      if (out.size() < count) out.push_back(std::move(s.samples));
    }
  }
  while (segmenter.finish(s)) {
  }
  // A file shorter than one batch: the ceiling still runs whole batches.
  for (size_t i = 0; !out.empty() && out.size() < count; ++i) out.push_back(out[i]);
  *total = segmenter.segments_emitted();
  return out;
}

// Where a pipeline point's engine time went, summed over its executions
// (one per forward(), counted once through the item at batch position 0).
struct Phases {
  uint64_t executions = 0, items = 0;
  double input_ms = 0, infer_ms = 0, output_ms = 0;
};

struct Measured {
  uint64_t segments = 0;
  std::vector<double> latency_ms;
  Phases phases;
};

// Submit-to-result time of every segment.
class LatencyLog {
 public:
  void started(uint64_t stream, uint64_t index) {
    std::lock_guard<std::mutex> lock(mu_);
    started_[{stream, index}] = Clock::now();
  }
  void finished(uint64_t stream, uint64_t index, const SegmentTiming& t) {
    std::lock_guard<std::mutex> lock(mu_);
    if (t.batch > 0 && t.batch_pos == 0) {
      ++phases_.executions;
      phases_.items += t.batch;
      phases_.input_ms += t.input_ns / 1e6;
      phases_.infer_ms += t.infer_ns / 1e6;
      phases_.output_ms += t.output_ns / 1e6;
    }
    auto it = started_.find({stream, index});
    if (it == started_.end()) return;
    ms_.push_back(ms_since(it->second));
    started_.erase(it);
  }
  std::vector<double> take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(ms_);
  }
  Phases phases() {
    std::lock_guard<std::mutex> lock(mu_);
    return phases_;
  }

 private:
  std::mutex mu_;
  std::map<std::pair<uint64_t, uint64_t>, Clock::time_point> started_;
  std::vector<double> ms_;
  Phases phases_;
};

// The pipeline's executor with a stopwatch on every segment. The probe's
// window closes when the batch driver lets go of the executor: after the last
// result AND the result file's commit (fsync, rename), which runs on a thread
// of its own after wait_idle() — the pipeline's whole work, timed; the
// executor's own shutdown (stopping workers) is not.
class MeasuredExecutor final : public Executor {
 public:
  MeasuredExecutor(std::unique_ptr<Executor> inner, ResourceProbe& probe, LatencyLog& log)
      : inner_(std::move(inner)), probe_(probe), log_(log) {}
  ~MeasuredExecutor() override { probe_.mark_end(); }
  void submit(SegmentTask task) override {
    log_.started(task.stream, task.index);
    inner_->submit(std::move(task));
  }
  bool try_submit(std::vector<SegmentTask>& tasks) override {
    for (const auto& t : tasks) log_.started(t.stream, t.index);
    return inner_->try_submit(tasks);
  }
  void wait_idle() override { inner_->wait_idle(); }
  void cancel(uint64_t stream) override { inner_->cancel(stream); }
  int workers() const override { return inner_->workers(); }
  ExecutorStats stats() const override { return inner_->stats(); }

 private:
  std::unique_ptr<Executor> inner_;
  ResourceProbe& probe_;
  LatencyLog& log_;
};

// `engine` has the plan's batch already: make_executor_factory plans again,
// which neither re-optimizes nor calibrates a fixed batch.
Measured pipeline(Config engine, const std::shared_ptr<const LoadedModel>& model, const std::string& audio,
                  ResourceProbe& probe) {
  char tmpl[] = "/tmp/corepool-bench-out-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("bench: cannot create a temp dir");
  BatchOptions batch;
  batch.paths = {audio};
  batch.out_dir = tmpl;
  batch.force = true;
  engine.queue_depth = 2 * engine.workers * engine.max_batch;
  const ExecutorFactory inner = make_executor_factory(engine, model);
  LatencyLog log;
  const ExecutorFactory measured = [&](Executor::Completion done) -> std::unique_ptr<Executor> {
    auto executor = inner([&log, done](SegmentResult&& r) {
      log.finished(r.stream, r.index, r.timing);
      done(std::move(r));
    });
    probe.mark_start();
    return std::make_unique<MeasuredExecutor>(std::move(executor), probe, log);
  };
  const BatchStats stats = run_batch(batch, model->config, measured);
  std::filesystem::remove_all(tmpl);
  if (stats.files_ok != 1) throw std::runtime_error("bench: the " + engine.mode + " pipeline run failed");
  return {stats.segments, log.take(), log.phases()};
}

// Per segment: ms of features, forward() and copy-out inside the engines, and
// the rest of the workers' wall time (waiting for work, dispatch, the
// pipeline's own threads taking the CPU). The ceilings have no phases.
PointSummary::Phases per_segment(const Phases& p, double worker_seconds) {
  if (p.items == 0) return {};
  const double n = static_cast<double>(p.items);
  const double engine_ms = p.input_ms + p.infer_ms + p.output_ms;
  return {p.input_ms / n, p.infer_ms / n, p.output_ms / n, (worker_seconds * 1e3 - engine_ms) / n,
          n / p.executions};
}

json point_json(const BenchOptions& o, const Config& engine, const EnginePlan& plan, const Measured& m,
                const ResourceProbe& probe, int usable) {
  const ProbeWindow w = probe.window();
  json memory = json::array();
  json allocator = json::object();
  for (const auto& [name, bytes] : w.allocator) allocator[name] = bytes;
  for (const auto& s : probe.samples()) memory.push_back({s.seconds, s.rss_kb, s.pss_kb});
  return {{"kind", o.point},
          {"workers", engine.workers},
          {"intra_op", engine.intra_op_threads},
          {"allocator", allocator_in_use()},
          {"optimize", plan.optimize.applied},
          {"kernels", plan.optimize.kernels},
          {"batch", plan.max_batch},
          {"batch_measured", plan.measured},
          {"winograd_chunks", plan.optimize.winograd_chunks},
          {"segments", m.segments},
          {"seconds", w.seconds},
          {"latency_ms", {percentile(m.latency_ms, 0.50), percentile(m.latency_ms, 0.95),
                          percentile(m.latency_ms, 0.99)}},
          {"cpu_seconds", w.used.cpu_seconds},
          {"cpu_util", w.seconds > 0 ? w.used.cpu_seconds / (w.seconds * usable) : 0.0},
          {"voluntary_switches", w.used.voluntary_switches},
          {"involuntary_switches", w.used.involuntary_switches},
          {"rss_peak_kb", w.rss_peak_kb},
          {"rss_avg_kb", w.rss_avg_kb},
          {"pss_peak_kb", w.pss_peak_kb},
          {"pss_avg_kb", w.pss_avg_kb},
          {"jemalloc_bytes", allocator},
          {"memory", memory},
          {"phases", phases_to_json(per_segment(m.phases, w.seconds * engine.workers))}};
}

// `--winograd-chunks 2,2,8`: sizes 1..WinogradConv::kMaxChunk; "" = none given.
std::vector<int64_t> parse_chunks(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int64_t n = 0;
    try {
      n = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || n < 1 || n > WinogradConv::kMaxChunk) {
      throw std::invalid_argument("bench: --winograd-chunks: \"" + item + "\" in \"" + text +
                                  "\" is not a size from 1 to " + std::to_string(WinogradConv::kMaxChunk));
    }
    out.push_back(n);
  }
  return out;
}

// `--point plan`: the plan alone (thread mode's), for the sweep to measure the
// batch once and run every point of one engine.optimize at it.
ExitCode print_plan(const BenchOptions& o, const Config& config) {
  auto model = load_model(o.model_dir);
  const EnginePlan plan = plan_engine(model, {config.optimize, config.max_batch, 1024, false, {}, config.kernels});
  std::printf("%s\n", json{{"kind", "plan"}, {"optimize", plan.optimize.applied}, {"kernels", plan.optimize.kernels},
                           {"batch", plan.max_batch},
                           {"winograd_chunks", plan.optimize.winograd_chunks}, {"plan", plan.text()}}.dump().c_str());
  return ExitCode::kOk;
}

// The roofline's two figures, in a child of their own like every point: the
// FLOP of the model as loaded (before any optimization), then the core's peak.
ExitCode print_roofline(const BenchOptions& o) {
  auto model = load_model(o.model_dir);
  const double flop = count_flop_per_segment(*model);
  const CorePeak peak = measure_core_peak();
  std::printf("%s\n", json{{"kind", "roofline"}, {"flop_per_segment", flop}, {"fp32_gflops", peak.fp32_gflops},
                           {"fp32_isa", peak.fp32_isa}, {"bf16_gflops", peak.bf16_gflops},
                           {"bf16_isa", peak.bf16_isa}}.dump().c_str());
  return ExitCode::kOk;
}

}  // namespace

ExitCode run_bench_point(const BenchOptions& o, const Config& config) {
  if (o.point == "memory") return run_memory_point(o, config);
  if (o.point == "respawn") return run_respawn_point(o, config);
  if (o.point == "plan") return print_plan(o, config);
  if (o.point == "roofline") return print_roofline(o);
  const bool processes = o.point == "process" || o.point == "ceiling-processes";
  // A process kind forks after its supervisor optimized and calibrated the
  // model: one thread, before any op, so that no OpenMP pool exists at fork
  // (main() leaves bench at the configured count; children set their own).
  if (processes) configure_runtime_threads({1, 1});
  ResourceProbe probe;  // before the model loads: the memory series shows start-up too
  auto model = load_model(o.model_dir);
  const CpuBudget budget = usable_cpus();
  Config engine = config;
  engine.workers = o.workers > 0 ? o.workers : budget.usable;
  engine.mode = o.point == "process" ? "process" : "thread";
  engine.pin_threads = o.pin;
  // The best path, as the pipeline of the same config runs it: optimized, at
  // the plan's batch (a ceiling at a worse batch would be no ceiling).
  const int limit = processes ? static_cast<int>(channel_layout(model->config).batch_limit()) : 1024;
  const EnginePlan plan =
      plan_engine(model, {engine.optimize, engine.max_batch, limit,
                          processes, parse_chunks(o.winograd_chunks), engine.kernels});
  engine.max_batch = plan.max_batch;
  const bool pin = o.pin && engine.intra_op_threads == 1;  // as make_executor_factory decides
  Measured m;
  if (o.point.rfind("ceiling", 0) != 0) {
    m = pipeline(engine, model, o.audio, probe);
  } else {
    CeilingRun run;
    run.workers = engine.workers;
    run.batch = plan.max_batch;
    run.intra_op = engine.intra_op_threads;
    run.cpus = pin ? budget.allowed : std::vector<int>{};
    run.inputs = read_segments(o.audio, model->config, run.batch, &run.segments);
    const CeilingResult r = o.point == "ceiling-threads" ? ceiling_threads(model, run, probe)
                                                         : ceiling_processes(model, run, probe);
    m = {r.segments, r.forward_ms, {}};
  }
  std::printf("%s\n", point_json(o, engine, plan, m, probe, budget.usable).dump().c_str());
  return ExitCode::kOk;
}

}  // namespace corepool
