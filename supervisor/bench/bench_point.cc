// One measurement point of `corepool bench`, run in its own process. Every
// point processes the same generated audio with the same batch size; the clock
// starts once the engines are built and have run one forward() (the warm-up),
// and stops when the last segment is done. Besides throughput, a point
// reports latency, CPU use, context switches and memory (ResourceProbe):
//   - the pipeline kinds time each segment from submit() to its result, with
//     at most 2 x workers x max_batch segments in flight (one batch running
//     and one waiting per worker: the latency a saturated service gives);
//   - the ceilings time each forward() call of one batch.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "supervisor/pool/allocator.h"
#include "supervisor/batch/batch.h"
#include "supervisor/bench/bench.h"
#include "supervisor/bench/bench_stats.h"
#include "supervisor/pool/executor_factory.h"
#include "supervisor/bench/resource_probe.h"
#include "audio/audio_stream.h"
#include "worker/cpus.h"
#include "worker/engine.h"
#include "worker/runtime.h"
#include "audio/segmenter.h"
#include "worker/shared_weights.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

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
  *total = segmenter.segments_emitted();
  return out;
}

// One engine's share of the ceiling: features once, then forward() `forwards`
// times; each call's milliseconds go to `times` when given.
void forward_loop(const std::shared_ptr<const LoadedModel>& model, const std::vector<std::vector<float>>& inputs,
                  uint64_t forwards, float* times) {
  Engine engine(model);
  std::vector<const float*> ptrs;
  for (const auto& v : inputs) ptrs.push_back(v.data());
  c10::InferenceMode guard;  // as Engine::infer runs: the input is an inference tensor too
  torch::Tensor features = engine.features(ptrs);
  for (uint64_t k = 0; k < forwards; ++k) {
    const auto t = Clock::now();
    engine.forward(features);
    if (times) times[k] = static_cast<float>(ms_since(t));
  }
}

struct Measured {
  uint64_t segments = 0;
  std::vector<double> latency_ms;
};

Measured ceiling_threads(const std::shared_ptr<const LoadedModel>& model, const std::vector<int>& cpus, int n,
                         const std::vector<std::vector<float>>& inputs, uint64_t segments, ResourceProbe& probe) {
  const uint64_t forwards = (segments / n + inputs.size() - 1) / inputs.size();
  std::vector<float> times(forwards * n);
  std::vector<std::thread> pool;
  probe.mark_start();
  for (int i = 0; i < n; ++i) {
    pool.emplace_back([&, i] {
      if (!cpus.empty()) pin_current_thread(cpus[i % cpus.size()]);
      forward_loop(model, inputs, forwards, times.data() + i * forwards);
    });
  }
  for (auto& t : pool) t.join();
  probe.mark_end();
  return {forwards * inputs.size() * n, std::vector<double>(times.begin(), times.end())};
}

void write_byte(int fd) {
  const char c = 1;
  if (::write(fd, &c, 1) != 1) throw std::runtime_error("bench: write() to a ceiling process pipe failed");
}

void read_byte(int fd, const char* what) {
  char c;
  if (::read(fd, &c, 1) != 1) throw std::runtime_error(std::string("bench: a ceiling process died ") + what);
}

// N forked processes over the shared weights. A pipe barrier starts the clock
// once every child has built its engine; each child reports the end of its
// loop through the same pipe and then waits, so that its CPU counters are read
// while it is alive and process exit stays out of the measurement. Forward
// times go through a shared anonymous mapping.
Measured ceiling_processes(const std::shared_ptr<const LoadedModel>& model, const std::vector<int>& cpus,
                           int n, int intra_op, const std::vector<std::vector<float>>& inputs, uint64_t segments,
                           ResourceProbe& probe) {
  SharedWeights weights = share_weights(*model);
  const uint64_t forwards = (segments / n + inputs.size() - 1) / inputs.size();
  const size_t times_bytes = sizeof(float) * forwards * n;
  void* mem = ::mmap(nullptr, times_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::runtime_error("bench: mmap of the latency table failed");
  auto* times = static_cast<float*>(mem);
  int ready[2], go[2];
  if (::pipe(ready) != 0 || ::pipe(go) != 0) throw std::runtime_error("bench: pipe() failed");
  std::vector<pid_t> children;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::madvise(weights.segment.data(), weights.segment.size(), MADV_POPULATE_READ);  // as a worker does
      configure_runtime_threads({intra_op, 1});
      if (!cpus.empty()) pin_current_thread(cpus[i % cpus.size()]);
      char c = 1;
      forward_loop(model, inputs, 1, nullptr);  // warm: engine built, first forward done
      // A child that lost its pipe to the parent has nothing to report: any
      // non-zero status fails the point in the parent.
      if (::write(ready[1], &c, 1) != 1 || ::read(go[0], &c, 1) != 1) ::_exit(exit_status(ExitCode::kInternal));
      forward_loop(model, inputs, forwards, times + i * forwards);
      if (::write(ready[1], &c, 1) != 1 || ::read(go[0], &c, 1) != 1) ::_exit(exit_status(ExitCode::kInternal));
      ::_exit(exit_status(ExitCode::kOk));
    }
    children.push_back(pid);
  }
  for (int i = 0; i < n; ++i) read_byte(ready[0], "while starting");
  probe.mark_start();
  for (int i = 0; i < n; ++i) write_byte(go[1]);
  for (int i = 0; i < n; ++i) read_byte(ready[0], "while running");
  probe.mark_end();
  for (int i = 0; i < n; ++i) write_byte(go[1]);
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("bench: a ceiling process failed");
  }
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
  Measured m{forwards * inputs.size() * n, std::vector<double>(times, times + forwards * n)};
  ::munmap(mem, times_bytes);
  return m;
}

// Submit-to-result time of every segment.
class LatencyLog {
 public:
  void started(uint64_t stream, uint64_t index) {
    std::lock_guard<std::mutex> lock(mu_);
    started_[{stream, index}] = Clock::now();
  }
  void finished(uint64_t stream, uint64_t index) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = started_.find({stream, index});
    if (it == started_.end()) return;
    ms_.push_back(ms_since(it->second));
    started_.erase(it);
  }
  std::vector<double> take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(ms_);
  }

 private:
  std::mutex mu_;
  std::map<std::pair<uint64_t, uint64_t>, Clock::time_point> started_;
  std::vector<double> ms_;
};

// The pipeline's executor with a stopwatch on every segment; the probe's
// window closes when the batch driver waits for the last result.
class MeasuredExecutor final : public Executor {
 public:
  MeasuredExecutor(std::unique_ptr<Executor> inner, ResourceProbe& probe, LatencyLog& log)
      : inner_(std::move(inner)), probe_(probe), log_(log) {}
  void submit(SegmentTask task) override {
    log_.started(task.stream, task.index);
    inner_->submit(std::move(task));
  }
  bool try_submit(std::vector<SegmentTask>& tasks) override {
    for (const auto& t : tasks) log_.started(t.stream, t.index);
    return inner_->try_submit(tasks);
  }
  void wait_idle() override {
    inner_->wait_idle();
    probe_.mark_end();
  }
  void cancel(uint64_t stream) override { inner_->cancel(stream); }
  int workers() const override { return inner_->workers(); }
  ExecutorStats stats() const override { return inner_->stats(); }

 private:
  std::unique_ptr<Executor> inner_;
  ResourceProbe& probe_;
  LatencyLog& log_;
};

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
      log.finished(r.stream, r.index);
      done(std::move(r));
    });
    probe.mark_start();
    return std::make_unique<MeasuredExecutor>(std::move(executor), probe, log);
  };
  const BatchStats stats = run_batch(batch, model->config, measured);
  std::filesystem::remove_all(tmpl);
  if (stats.files_ok != 1) throw std::runtime_error("bench: the " + engine.mode + " pipeline run failed");
  return {stats.segments, log.take()};
}

json point_json(const BenchOptions& o, const Config& engine, const Measured& m, const ResourceProbe& probe,
                int usable) {
  const ProbeWindow w = probe.window();
  json memory = json::array();
  json allocator = json::object();
  for (const auto& [name, bytes] : w.allocator) allocator[name] = bytes;
  for (const auto& s : probe.samples()) memory.push_back({s.seconds, s.rss_kb, s.pss_kb});
  return {{"kind", o.point},
          {"workers", engine.workers},
          {"intra_op", engine.intra_op_threads},
          {"allocator", allocator_in_use()},
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
          {"memory", memory}};
}

}  // namespace

ExitCode run_bench_point(const BenchOptions& o, const Config& config) {
  if (o.point == "memory") return run_memory_point(o);
  if (o.point == "respawn") return run_respawn_point(o);
  ResourceProbe probe;  // before the model loads: the memory series shows start-up too
  auto model = load_model(o.model_dir);
  const CpuBudget budget = usable_cpus();
  Config engine = config;
  engine.workers = o.workers > 0 ? o.workers : budget.usable;
  engine.mode = o.point == "process" ? "process" : "thread";
  engine.pin_threads = o.pin;
  const bool pin = o.pin && engine.intra_op_threads == 1;  // as make_executor_factory decides
  const std::vector<int> cpus = pin ? budget.allowed : std::vector<int>{};
  Measured m;
  if (o.point == "thread" || o.point == "process" || o.point == "defaults") {
    m = pipeline(engine, model, o.audio, probe);
  } else {
    uint64_t total = 0;
    const auto inputs = read_segments(o.audio, model->config, engine.max_batch, &total);
    m = o.point == "ceiling-threads"
            ? ceiling_threads(model, cpus, engine.workers, inputs, total, probe)
            : ceiling_processes(model, cpus, engine.workers, engine.intra_op_threads, inputs, total, probe);
  }
  std::printf("%s\n", point_json(o, engine, m, probe, budget.usable).dump().c_str());
  return ExitCode::kOk;
}

}  // namespace corepool
