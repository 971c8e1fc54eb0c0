// How an engine will run a model, decided once before any engine or worker
// exists: the optimization applied (engine.optimize, on engine.kernels' path) and the batch size
// (engine.max_batch, measured when 0). Made by the executor factory; read by
// the log, /metrics, doctor and bench. Torch-free: a plain value.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "worker/calibrate.h"
#include "worker/model/model.h"
#include "worker/optimize/optimize.h"

namespace corepool {

struct EnginePlan {
  OptimizeOutcome optimize;
  int max_batch = 1;          // what the engines will use
  bool measured = false;      // max_batch came from calibrate_batch() (in this run or a cached one)
  Calibration calibration;    // when measured
  bool cached = false;        // the measurements came from the plan cache (plan_cache.h)
  std::string planned_at;     // ... measured then (UTC)
  std::string stateful;       // stateful_text(), "" for a stateless model
  std::string text() const;   // one log line
};

struct PlanRequest {
  std::string optimize = "onednn";  // engine.optimize
  int max_batch = 0;                // engine.max_batch; 0 = measure
  int limit = 1024;                 // the most a batch may hold (the model's and the rings' limits)
  bool shared = false;              // process mode: optimized weights in a shared WeightArena
  std::vector<int64_t> winograd_chunks{};  // items per Winograd call, per layer; empty = measure (optimize.h)
  std::string kernels = "auto";            // engine.kernels (worker/kernels/kernel_path.h)
  std::string cache_dir{};                 // the plan cache's directory; "" = no cache (plan_cache.h)
  bool replan = false;                     // measure anew and replace the cached plan
  int engines = 1;                         // engines of the run, all busy while the batch is timed
};

// "stateful model: method _model.forward, chunk 512 + context 64 samples,
// state [2, B, 128]" for the plan line and doctor; "" for a stateless model.
std::string stateful_text(const ModelConfig& config);

// Optimizes (falling back with a WARN), then calibrates when asked; logs the
// plan. With a cache directory, a plan cached for this model, CPU, libraries
// and request gives the Winograd items per call and the batch instead of
// measuring them; a plan measured here is stored for the next start. Throws
// what a failing forward() throws (ModelError, c10::Error).
EnginePlan plan_engine(const std::shared_ptr<const LoadedModel>& model, const PlanRequest& request);

}  // namespace corepool
