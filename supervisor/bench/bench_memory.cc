// Memory and respawn benchmarks of process mode. Memory: total PSS of the
// supervisor and its N workers with the weights shared (one read-only segment)
// and naive (every worker loads its own copy), after every worker has run a
// few batches at the plan's batch, read twice: right after the work (each
// worker still holds its batch's activations for the next batch: it gives them
// back after 100 ms idle, engine_arena.h), and at rest 2 s later; the naive
// supervisor holds no copy. Respawn:
// from SIGKILL of a worker to its replacement answering, 20 times, with the
// weights already in the shared arena.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "supervisor/bench/bench.h"
#include "supervisor/bench/bench_stats.h"
#include "supervisor/pool/process_memory.h"
#include "supervisor/pool/process_pool.h"
#include "worker/engine_plan.h"
#include "worker/runtime.h"
#include "worker/model/torch_module.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr int kRespawnKills = 20;
constexpr std::chrono::seconds kRestAfterWork{2};  // twice jemalloc's dirty_decay_ms in corepool's MALLOC_CONF

// Counts completions so that a caller can wait for the n-th.
struct Counter {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t done = 0;
  void add() {
    std::lock_guard<std::mutex> lock(mu);
    ++done;
    cv.notify_all();
  }
  void wait_for(uint64_t n) {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::minutes(5), [&] { return done >= n; })) {
      throw std::runtime_error("bench: requests not answered within 5 minutes");
    }
  }
};

// The pool the service would start: the plan's batch, engine.optimize (naive
// workers optimize their private copy the same way), one thread per worker.
ProcessPoolOptions pool_options(int workers, bool naive, int batch, const Config& engine) {
  ProcessPoolOptions opts;
  opts.workers = workers;
  opts.max_batch = batch;
  opts.log_level = std::string(spdlog::level::to_string_view(spdlog::get_level()).data());
  opts.naive_weights = naive;
  opts.optimize = engine.optimize;
  opts.kernels = engine.kernels;
  return opts;
}

// As make_executor_factory plans process mode: optimized into the shared,
// sealed arena, the batch measured when engine.max_batch is 0. The caller has
// set this process to one LibTorch thread (no OpenMP pool at fork).
EnginePlan plan_shared(const std::shared_ptr<const LoadedModel>& model, const Config& engine) {
  const int limit = static_cast<int>(channel_layout(model->config).batch_limit());
  return plan_engine(model, {engine.optimize, engine.max_batch, limit, true, {}, engine.kernels});
}

// The naive baseline's supervisor: the model's config and no weights (an empty
// module), so that the total is exactly N private copies, the workers' own.
std::shared_ptr<const LoadedModel> config_only(const std::string& dir) {
  auto model = std::make_shared<LoadedModel>();
  model->dir = dir;
  model->config = load_model_config(dir + "/model.toml");
  model->torch = std::make_shared<TorchModule>();
  return model;
}

// Where a respawn's time goes: SIGKILL -> the supervisor reaped the victim
// (its slot shows another pid or none), -> the replacement is ready. Polled
// every 200 us: a spinning poll would take a cpu from the worker it times.
struct RespawnPhases {
  double reaped_ms = -1, ready_ms = -1;
};

RespawnPhases watch_respawn(const ProcessPool& pool, int victim, Clock::time_point start) {
  RespawnPhases p;
  while (ms_since(start) < 10000) {
    const ExecutorStats s = pool.stats();
    const int pid = s.pids.empty() ? victim : s.pids[0];
    if (p.reaped_ms < 0 && pid != victim) p.reaped_ms = ms_since(start);
    if (pid != victim && pid != 0 && s.all_ready) {
      p.ready_ms = ms_since(start);
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return p;
}

}  // namespace

ExitCode run_memory_point(const BenchOptions& o, const Config& engine) {
  configure_runtime_threads({1, 1});  // before any op: this process forks workers
  std::shared_ptr<const LoadedModel> model;
  int batch = engine.max_batch;  // naive: the plan's batch, measured by the caller
  if (o.naive) {
    model = config_only(o.model_dir);
  } else {
    model = load_model(o.model_dir);
    batch = plan_shared(model, engine).max_batch;
  }
  Counter counter;
  ProcessPool pool(model, pool_options(o.workers, o.naive, batch, engine), [&](SegmentResult&&) { counter.add(); });
  // A few batches per worker, so every worker has allocated its activations.
  const uint64_t n = 3 * static_cast<uint64_t>(o.workers) * batch;
  for (uint64_t i = 0; i < n; ++i) pool.submit({0, i, std::vector<float>(model->config.segment_samples(), 0.01f)});
  counter.wait_for(n);
  auto family_pss_kb = [&pool] {
    long total = read_process_memory(::getpid()).pss_kb;
    for (int pid : pool.worker_pids()) total += read_process_memory(pid).pss_kb;
    return total;
  };
  const long busy = family_pss_kb();
  const long supervisor = read_process_memory(::getpid()).pss_kb;
  // At rest: each worker has purged its engine arena after 100 ms idle, and
  // jemalloc's decay (dirty_decay_ms, 1 s by default; workers run its
  // background thread) has given back what the rest of the process freed.
  std::this_thread::sleep_for(kRestAfterWork);
  json j{{"kind", "memory"}, {"workers", o.workers}, {"naive", o.naive}, {"batch", batch}, {"pss_kb", busy},
         {"rest_pss_kb", family_pss_kb()}, {"supervisor_pss_kb", supervisor}};
  if (!o.naive) j["weight_bytes"] = model->weight_bytes;
  std::printf("%s\n", j.dump().c_str());
  return ExitCode::kOk;
}

ExitCode run_respawn_point(const BenchOptions& o, const Config& engine) {
  configure_runtime_threads({1, 1});
  auto model = load_model(o.model_dir);
  const int batch = plan_shared(model, engine).max_batch;
  Counter counter;
  ProcessPool pool(model, pool_options(1, false, batch, engine), [&](SegmentResult&&) { counter.add(); });
  const std::vector<float> pcm(model->config.segment_samples(), 0.01f);
  pool.submit({0, 0, pcm});
  counter.wait_for(1);
  std::vector<double> ms, steady;
  uint64_t sent = 1;
  auto timed_request = [&] {
    const auto start = Clock::now();
    pool.submit({0, sent, pcm});
    counter.wait_for(++sent);
    return ms_since(start);
  };
  json phases = json::array();
  for (int k = 0; k < kRespawnKills; ++k) {
    const int victim = pool.worker_pids()[0];
    const auto start = Clock::now();
    ::kill(victim, SIGKILL);
    pool.submit({0, sent, pcm});  // queued until the replacement takes it
    const RespawnPhases p = watch_respawn(pool, victim, start);
    counter.wait_for(++sent);
    ms.push_back(ms_since(start));
    phases.push_back({p.reaped_ms, p.ready_ms, ms.back()});
    steady.push_back(timed_request());  // the same request on a warm worker, for reference
  }
  const std::vector<double> each = ms;
  std::sort(ms.begin(), ms.end());
  std::sort(steady.begin(), steady.end());
  std::printf("%s\n", json{{"kind", "respawn"}, {"each_ms", each}, {"median_ms", ms[ms.size() / 2]},
                           {"max_ms", ms.back()}, {"min_ms", ms.front()},
                           {"warm_request_ms", steady[steady.size() / 2]},
                           {"phases", {{"columns", {"reaped_ms", "ready_ms", "answered_ms"}}, {"each", phases}}},
                           {"weight_bytes", model->weight_bytes}}.dump().c_str());
  return ExitCode::kOk;
}

// One table of the memory comparison from the points' `key` figure.
void print_memory_table(const std::string& when, const char* key, const std::vector<int>& counts,
                        const std::vector<std::pair<json, json>>& points, int batch) {
  std::printf("\nTotal PSS %s:\n%8s %6s %16s %16s %12s %22s\n", when.c_str(), "workers", "batch", "shared PSS MB",
              "naive PSS MB", "naive/shared", "shared: added/worker");
  double weights_mb = 0, prev_shared = 0, naive_per_copy = 0;
  int prev_n = 0;
  std::vector<std::pair<double, double>> shared_points;  // (workers, shared PSS MB)
  for (size_t i = 0; i < counts.size(); ++i) {
    const int n = counts[i];
    const auto& [shared, naive] = points[i];
    const double mb[2] = {shared[key].get<double>() / 1024.0, naive[key].get<double>() / 1024.0};
    weights_mb = shared["weight_bytes"].get<double>() / (1024.0 * 1024.0);
    naive_per_copy = mb[1] / n;
    std::string added = "-";
    if (prev_n > 0) {
      const double per_worker = (mb[0] - prev_shared) / (n - prev_n);
      added = fmt::format("{:.1f} MB = {:.1f}% of weights", per_worker, 100.0 * per_worker / weights_mb);
    }
    std::printf("%8d %6d %16.1f %16.1f %12.2f %22s\n", n, batch, mb[0], mb[1], mb[1] / mb[0], added.c_str());
    prev_shared = mb[0];
    prev_n = n;
    shared_points.emplace_back(n, mb[0]);
  }
  if (shared_points.size() >= 2) {
    // Each step's difference moves with the kernel's 4 MB-grained accounting;
    // the least-squares slope over every point is the steadier figure.
    const double slope = least_squares_slope(shared_points);
    std::printf("shared: added/worker, least-squares slope over every point: %.1f MB = %.1f%% of weights\n", slope,
                100.0 * slope / weights_mb);
  }
  std::printf("weights: %.1f MB; naive: %.1f MB per worker at %d (its supervisor holds no copy)\n", weights_mb,
              naive_per_copy, prev_n);
  std::fflush(stdout);
}

// Medians of each phase, and the slowest kill's phases.
void print_respawn_phases(const json& each) {
  std::vector<double> reaped, ready, answered;
  size_t slowest = 0;
  for (size_t i = 0; i < each.size(); ++i) {
    reaped.push_back(each[i][0]);
    ready.push_back(each[i][1]);
    answered.push_back(each[i][2]);
    if (answered[i] > answered[slowest]) slowest = i;
  }
  if (each.empty()) return;
  std::printf("\nwhere it goes, ms after SIGKILL (median; the slowest kill): reaped by the supervisor %.1f (%.1f), "
              "replacement ready %.1f (%.1f), request answered %.1f (%.1f)\n",
              median(reaped), reaped[slowest], median(ready), ready[slowest], median(answered), answered[slowest]);
}

ExitCode run_memory_bench(const BenchOptions& o) {
  std::printf("corepool bench --memory: model %s, engine.optimize %s, batch %s (the plan's)\n",
              o.model_dir.c_str(), o.optimize.c_str(),
              o.max_batch == 0 ? "measured" : std::to_string(o.max_batch).c_str());
  // The plan's batch, measured once (engine.max_batch = 0) for every point:
  // points that calibrated each for themselves would differ by its noise.
  int batch = o.max_batch;
  if (batch == 0) {
    const json plan = json::parse(run_self({"--log-level", "warn", "bench", "--point", "plan", "--model", o.model_dir,
                                            "--optimize", o.optimize, "--kernels", o.kernels, "--max-batch", "0"}));
    batch = plan["batch"];
    std::printf("batch measured once for every point: %s\n", plan["plan"].get<std::string>().c_str());
  }
  const std::vector<int> counts = o.worker_counts.empty() ? std::vector<int>{1, 2, 4, 8} : o.worker_counts;
  std::vector<std::pair<json, json>> points;  // (shared, naive) per count
  for (int n : counts) {
    points.emplace_back(json::parse(run_self({"--log-level", "warn", "bench", "--point", "memory", "--model",
                                              o.model_dir, "--workers", std::to_string(n), "--optimize", o.optimize,
                                              "--kernels", o.kernels, "--max-batch", std::to_string(batch)})),
                        json::parse(run_self({"--log-level", "warn", "bench", "--point", "memory", "--model",
                                              o.model_dir, "--workers", std::to_string(n), "--naive", "--optimize",
                                              o.optimize, "--kernels", o.kernels, "--max-batch",
                                              std::to_string(batch)})));
  }
  print_memory_table("right after the work (every worker still holds its batch's activations, kept for reuse until 100 ms idle)", "pss_kb",
                     counts, points, batch);
  print_memory_table(fmt::format("at rest, {} s later (freed pages given back)", kRestAfterWork.count()),
                     "rest_pss_kb", counts, points, batch);
  if (o.respawn) {
    const json j = json::parse(run_self({"--log-level", "error", "bench", "--point", "respawn", "--model",
                                         o.model_dir, "--optimize", o.optimize, "--kernels", o.kernels, "--max-batch",
                                         std::to_string(batch)}));
    std::printf("respawn (SIGKILL -> replacement answers), %d kills: median %.1f ms, min %.1f ms, max %.1f ms;\n"
                "the same request on a warm worker: median %.1f ms\neach kill, in order (ms):",
                kRespawnKills, j["median_ms"].get<double>(), j["min_ms"].get<double>(), j["max_ms"].get<double>(),
                j["warm_request_ms"].get<double>());
    for (const auto& v : j["each_ms"]) std::printf(" %.1f", v.get<double>());
    print_respawn_phases(j["phases"]["each"]);
  }
  return ExitCode::kOk;
}

}  // namespace corepool
