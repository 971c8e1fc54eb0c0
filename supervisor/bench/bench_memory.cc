// Memory and respawn benchmarks of process mode. Memory: total PSS of the
// supervisor and its N workers with the weights shared (one read-only segment)
// and naive (every worker loads its own copy), after every worker has run a
// few forward()s. Respawn: from SIGKILL of a worker to its replacement
// answering a request, with the weights already in shared memory.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "supervisor/bench/bench.h"
#include "supervisor/pool/process_memory.h"
#include "supervisor/pool/process_pool.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

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

ProcessPoolOptions pool_options(int workers, bool naive) {
  ProcessPoolOptions opts;
  opts.workers = workers;
  opts.max_batch = 1;
  opts.log_level = std::string(spdlog::level::to_string_view(spdlog::get_level()).data());
  opts.naive_weights = naive;
  return opts;
}

}  // namespace

ExitCode run_memory_point(const BenchOptions& o) {
  auto model = load_model(o.model_dir);
  const size_t weight_bytes = model->weight_bytes;
  Counter counter;
  ProcessPool pool(model, pool_options(o.workers, o.naive), [&](SegmentResult&&) { counter.add(); });
  // A few segments per worker, so every worker has allocated its activations.
  const uint64_t n = 3 * static_cast<uint64_t>(o.workers);
  for (uint64_t i = 0; i < n; ++i) pool.submit({0, i, std::vector<float>(model->config.segment_samples(), 0.01f)});
  counter.wait_for(n);
  long total = read_process_memory(::getpid()).pss_kb;
  const long supervisor = total;
  for (int pid : pool.worker_pids()) total += read_process_memory(pid).pss_kb;
  std::printf("%s\n", json{{"kind", "memory"}, {"workers", o.workers}, {"naive", o.naive},
                           {"pss_kb", total}, {"supervisor_pss_kb", supervisor},
                           {"weight_bytes", weight_bytes}}.dump().c_str());
  return ExitCode::kOk;
}

ExitCode run_respawn_point(const BenchOptions& o) {
  auto model = load_model(o.model_dir);
  Counter counter;
  ProcessPool pool(model, pool_options(1, false), [&](SegmentResult&&) { counter.add(); });
  const std::vector<float> pcm(model->config.segment_samples(), 0.01f);
  pool.submit({0, 0, pcm});
  counter.wait_for(1);
  std::vector<double> ms, steady;
  uint64_t sent = 1;
  auto timed_request = [&] {
    const auto start = Clock::now();
    pool.submit({0, sent, pcm});
    counter.wait_for(++sent);
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  };
  for (int k = 0; k < 10; ++k) {
    const int victim = pool.worker_pids()[0];
    const auto start = Clock::now();
    ::kill(victim, SIGKILL);
    pool.submit({0, sent, pcm});  // queued until the replacement takes it
    counter.wait_for(++sent);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    steady.push_back(timed_request());  // the same request on a warm worker, for reference
  }
  std::sort(ms.begin(), ms.end());
  std::sort(steady.begin(), steady.end());
  std::printf("%s\n", json{{"kind", "respawn"}, {"median_ms", ms[ms.size() / 2]}, {"max_ms", ms.back()},
                           {"min_ms", ms.front()}, {"warm_request_ms", steady[steady.size() / 2]},
                           {"weight_bytes", model->weight_bytes}}.dump().c_str());
  return ExitCode::kOk;
}

ExitCode run_memory_bench(const BenchOptions& o) {
  std::printf("corepool bench --memory: model %s\n\n", o.model_dir.c_str());
  std::printf("%8s %16s %16s %12s %22s\n", "workers", "shared PSS MB", "naive PSS MB", "naive/shared",
              "shared: added/worker");
  double weights_mb = 0, prev_shared = 0;
  int prev_n = 0;
  const std::vector<int> counts = o.worker_counts.empty() ? std::vector<int>{1, 2, 4, 8} : o.worker_counts;
  for (int n : counts) {
    double mb[2] = {0, 0};
    for (int naive = 0; naive < 2; ++naive) {
      const json j = json::parse(run_self({"--log-level", "warn", "bench", "--point", "memory", "--model",
                                           o.model_dir, "--workers", std::to_string(n),
                                           naive ? "--naive" : "--pin"}));
      mb[naive] = j["pss_kb"].get<double>() / 1024.0;
      weights_mb = j["weight_bytes"].get<double>() / (1024.0 * 1024.0);
    }
    std::string added = "-";
    if (prev_n > 0) {
      const double per_worker = (mb[0] - prev_shared) / (n - prev_n);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f MB = %.1f%% of weights", per_worker, 100.0 * per_worker / weights_mb);
      added = buf;
    }
    std::printf("%8d %16.1f %16.1f %12.2f %22s\n", n, mb[0], mb[1], mb[1] / mb[0], added.c_str());
    std::fflush(stdout);
    prev_shared = mb[0];
    prev_n = n;
  }
  std::printf("\nweights: %.1f MB\n", weights_mb);
  if (o.respawn) {
    const json j = json::parse(run_self({"--log-level", "error", "bench", "--point", "respawn", "--model", o.model_dir}));
    std::printf("respawn (SIGKILL -> replacement answers), 10 kills: median %.1f ms, min %.1f ms, max %.1f ms;\n"
                "the same request on a warm worker: median %.1f ms\n",
                j["median_ms"].get<double>(), j["min_ms"].get<double>(), j["max_ms"].get<double>(),
                j["warm_request_ms"].get<double>());
  }
  return ExitCode::kOk;
}

}  // namespace corepool
