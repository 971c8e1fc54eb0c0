// One generation of `corepool serve`: a loaded model, the executor running it
// (engine threads or forked workers with their weight segment) and the table
// that routes each completed segment to the request it belongs to. A reload
// (SIGHUP) builds a new generation next to the old one and swaps it in; the
// old one finishes what it was given and is destroyed by the main thread once
// no request holds it, which frees its workers and its weight segment.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "config/config.h"
#include "supervisor/triton/model_statistics.h"
#include "worker/engine_plan.h"
#include "worker/executor.h"
#include "worker/model/model.h"

namespace corepool {

class Generation {
 public:
  // Receives the results of one stream (request), on an executor thread.
  using Sink = std::function<void(SegmentResult&&)>;

  // Loads nothing: `model` is loaded by the caller. Starts the executor and
  // returns once every worker is ready. Throws ModelError or std::runtime_error.
  // Every forward() it runs is recorded in `stats` (if any), which outlives it.
  Generation(uint64_t number, Config config, std::shared_ptr<const LoadedModel> model,
             std::shared_ptr<ModelStatistics> stats = nullptr);
  // Waits for every submitted segment, then stops the executor. Never call it
  // on an executor thread (a completion callback): it would wait for itself.
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  uint64_t number() const { return number_; }
  const Config& config() const { return config_; }
  const LoadedModel& model() const { return *model_; }
  Executor& executor() { return *executor_; }
  // The optimization applied and the batch size in use (measured or configured).
  const EnginePlan& plan() const { return plan_; }

  // A new stream id whose results go to `sink` until close_stream(id).
  // Results for a closed (or unknown) stream are dropped.
  uint64_t open_stream(Sink sink);
  void close_stream(uint64_t id);
  size_t open_streams() const;
  // Results that arrived for a closed stream (its request already answered,
  // e.g. 504 at its deadline) and were dropped.
  uint64_t results_dropped() const { return dropped_.load(); }

 private:
  void route(SegmentResult&& result);

  const uint64_t number_;
  const Config config_;
  const std::shared_ptr<const LoadedModel> model_;
  const std::shared_ptr<ModelStatistics> stats_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<Sink>> streams_;
  std::atomic<uint64_t> next_stream_{1};
  std::atomic<uint64_t> dropped_{0};
  EnginePlan plan_;
  std::unique_ptr<Executor> executor_;  // last: stopped before the table it routes into
};

}  // namespace corepool
