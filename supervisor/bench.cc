// Throughput: the bare ceilings (N pinned threads / N pinned processes in tight
// forward() loops on precomputed features of the same audio, no pipeline, no
// IPC) against thread mode and process mode through the full pipeline. Every
// point processes the same number of segments with the same workers, pinning
// and batch size; pipeline points exclude executor start-up, as the ceilings
// exclude model loading.
#include "supervisor/bench.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "supervisor/batch.h"
#include "supervisor/process_pool.h"
#include "tools/audio_synth.h"
#include "worker/audio_stream.h"
#include "worker/cpus.h"
#include "worker/engine.h"
#include "worker/runtime.h"
#include "worker/segmenter.h"
#include "worker/shared_weights.h"
#include "worker/thread_executor.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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

// One engine's share of the ceiling: features once, then forward() `forwards` times.
void forward_loop(const std::shared_ptr<const LoadedModel>& model, const std::vector<std::vector<float>>& inputs,
                  uint64_t forwards) {
  Engine engine(model);
  std::vector<const float*> ptrs;
  for (const auto& v : inputs) ptrs.push_back(v.data());
  c10::InferenceMode guard;  // as Engine::infer runs: the input is an inference tensor too
  torch::Tensor features = engine.features(ptrs);
  for (uint64_t k = 0; k < forwards; ++k) engine.forward(features);
}

json ceiling_threads(const std::shared_ptr<const LoadedModel>& model, const std::vector<int>& cpus, int n,
                     const std::vector<std::vector<float>>& inputs, uint64_t segments) {
  const uint64_t forwards = (segments / n + inputs.size() - 1) / inputs.size();
  std::vector<std::thread> pool;
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    pool.emplace_back([&, i] {
      if (!cpus.empty()) pin_current_thread(cpus[i % cpus.size()]);
      forward_loop(model, inputs, forwards);
    });
  }
  for (auto& t : pool) t.join();
  return {{"segments", forwards * inputs.size() * n}, {"seconds", seconds_since(start)}};
}

// N forked processes over the shared weights. A pipe barrier starts the clock
// once every child has built its engine, as the pipeline points exclude
// start-up; each child reports the end of its loop through the same pipe, so
// process exit and reaping stay out of the measurement too.
json ceiling_processes(const std::shared_ptr<const LoadedModel>& model, const std::vector<int>& cpus, int n,
                       const std::vector<std::vector<float>>& inputs, uint64_t segments) {
  SharedWeights weights = share_weights(*model);
  const uint64_t forwards = (segments / n + inputs.size() - 1) / inputs.size();
  int ready[2], go[2];
  if (::pipe(ready) != 0 || ::pipe(go) != 0) throw std::runtime_error("pipe() failed");
  std::vector<pid_t> children;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::madvise(weights.segment.data(), weights.segment.size(), MADV_POPULATE_READ);  // as a worker does
      configure_runtime_threads({1, 1});
      if (!cpus.empty()) pin_current_thread(cpus[i % cpus.size()]);
      forward_loop(model, inputs, 1);  // warm: engine built, first forward done
      char c = 1;
      if (::write(ready[1], &c, 1) != 1 || ::read(go[0], &c, 1) != 1) ::_exit(2);
      forward_loop(model, inputs, forwards);
      if (::write(ready[1], &c, 1) != 1) ::_exit(2);
      ::_exit(0);
    }
    children.push_back(pid);
  }
  char c;
  for (int i = 0; i < n; ++i) {
    if (::read(ready[0], &c, 1) != 1) throw std::runtime_error("a ceiling process died while starting");
  }
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    if (::write(go[1], &c, 1) != 1) throw std::runtime_error("write() to a ceiling process failed");
  }
  for (int i = 0; i < n; ++i) {
    if (::read(ready[0], &c, 1) != 1) throw std::runtime_error("a ceiling process died while running");
  }
  const double secs = seconds_since(start);
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("a ceiling process failed");
  }
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
  return {{"segments", forwards * inputs.size() * n}, {"seconds", secs}};
}

json pipeline(const std::string& kind, const std::shared_ptr<const LoadedModel>& model, const std::vector<int>& cpus,
              int n, int max_batch, const std::string& audio) {
  char tmpl[] = "/tmp/corepool-bench-out-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("bench: cannot create a temp dir");
  BatchOptions batch;
  batch.paths = {audio};
  batch.out_dir = tmpl;
  batch.force = true;
  ExecutorFactory factory;
  if (kind == "thread") {
    factory = [&](Executor::Completion done) {
      return std::make_unique<ThreadExecutor>(model, ThreadExecutorOptions{n, max_batch, 0, cpus}, std::move(done));
    };
  } else {
    ProcessPoolOptions opts;
    opts.workers = n;
    opts.max_batch = max_batch;
    opts.cpus = cpus;
    opts.log_level = "warn";
    factory = [&, opts](Executor::Completion done) { return std::make_unique<ProcessPool>(model, opts, std::move(done)); };
  }
  BatchStats stats = run_batch(batch, model->config, factory);
  std::filesystem::remove_all(tmpl);
  if (stats.files_ok != 1) throw std::runtime_error("bench: the " + kind + " pipeline run failed");
  return {{"segments", stats.segments}, {"seconds", stats.serving_seconds}};
}

struct Point {
  std::string kind;
  std::vector<double> rates;  // segments per second, one per repeat
};

void print_throughput(const std::vector<Point>& points, double hop_seconds, int workers) {
  std::map<std::string, double> med;
  std::printf("\n%-36s %12s %12s\n", "configuration (median)", "segments/s", "x-real-time");
  const std::map<std::string, std::string> names = {
      {"ceiling-threads", "bare ceiling, threads (forward loops)"},
      {"thread", "thread mode (full pipeline)"},
      {"ceiling-processes", "bare ceiling, processes"},
      {"process", "process mode (full pipeline)"}};
  for (const auto& p : points) {
    med[p.kind] = median(p.rates);
    std::printf("%-36s %12.1f %12.1f\n", names.at(p.kind).c_str(), med[p.kind], med[p.kind] * hop_seconds);
  }
  std::printf("\n");
  if (med.count("thread")) {
    std::printf("thread mode reaches %.3f of the thread ceiling at %d engine thread(s)\n",
                med["thread"] / med["ceiling-threads"], workers);
  }
  if (med.count("process")) {
    std::printf("process mode reaches %.3f of the process ceiling at %d worker(s)\n",
                med["process"] / med["ceiling-processes"], workers);
  }
}

}  // namespace

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

int run_bench_point(const BenchOptions& o) {
  if (o.point == "memory") return run_memory_point(o);
  if (o.point == "respawn") return run_respawn_point(o);
  auto model = load_model(o.model_dir);
  const CpuBudget budget = usable_cpus();
  const int n = o.workers > 0 ? o.workers : budget.usable;
  const std::vector<int> cpus = o.pin ? budget.allowed : std::vector<int>{};
  json result;
  if (o.point == "thread" || o.point == "process") {
    result = pipeline(o.point, model, cpus, n, o.max_batch, o.audio);
  } else {
    uint64_t total = 0;
    const auto inputs = read_segments(o.audio, model->config, o.max_batch, &total);
    result = o.point == "ceiling-threads" ? ceiling_threads(model, cpus, n, inputs, total)
                                          : ceiling_processes(model, cpus, n, inputs, total);
  }
  result["kind"] = o.point;
  std::printf("%s\n", result.dump().c_str());
  return 0;
}

int run_bench(const BenchOptions& o) {
  if (o.memory) return run_memory_bench(o);
  auto model = load_model(o.model_dir);  // fails early, with the model error, if unusable
  const int n = o.workers > 0 ? o.workers : usable_cpus().usable;
  char tmpl[] = "/tmp/corepool-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("bench: cannot create a temp dir");
  const std::string dir = tmpl;
  const synth::FileSpec spec = synth::demo_of_seconds(o.audio_seconds, model->config.sample_rate);
  const std::string audio = dir + "/bench.wav";
  synth::write_audio(audio, spec);

  std::vector<Point> points;
  for (const auto& mode : o.modes) {
    points.push_back({mode == "thread" ? "ceiling-threads" : "ceiling-processes", {}});
    points.push_back({mode, {}});
  }
  std::printf("corepool bench: model %s, %d worker(s), max batch %d, %.0f s of audio, %d repeats\n",
              o.model_dir.c_str(), n, o.max_batch, synth::duration_seconds(spec), o.repeats);
  for (int r = 0; r < o.repeats; ++r) {
    for (auto& p : points) {
      const json j = json::parse(run_self({"--log-level", "warn", "bench", "--point", p.kind, "--audio", audio,
                                           "--model", o.model_dir, "--workers", std::to_string(n),
                                           "--max-batch", std::to_string(o.max_batch), o.pin ? "--pin" : "--no-pin"}));
      p.rates.push_back(j["segments"].get<double>() / j["seconds"].get<double>());
      std::printf("  repeat %d  %-18s %8.1f segments/s\n", r + 1, p.kind.c_str(), p.rates.back());
      std::fflush(stdout);
    }
  }
  print_throughput(points, model->config.hop_seconds, n);
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace corepool
