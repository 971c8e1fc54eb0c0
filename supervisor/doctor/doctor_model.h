// The doctor's model checks: load the configured model as `batch` and `serve`
// would, report its weights by dtype, and run one forward() of a full batch
// of silence to time it and to measure the activation memory a worker holds.
// Called once by doctor.cc; the probe owns the loaded model until it is dropped.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "supervisor/doctor/doctor_check.h"
#include "worker/engine_plan.h"
#include "worker/model/model.h"

namespace corepool {

struct ModelProbe {
  std::shared_ptr<const LoadedModel> model;  // null when it did not load
  std::vector<CheckResult> results;          // "model", then "forward" if it loaded
  bool forward_ok = false;                   // the forward() ran and its output had the right shape
  uint64_t activation_bytes = 0;             // peak heap growth of the one forward()
  EnginePlan plan;                           // as the service would plan it
};

// `max_batch` is engine.max_batch (0 = measured; capped at the model's own
// max_batch), `optimize` engine.optimize, `kernels` engine.kernels: the probe
// plans the engine as the service would ("engine plan", "kernels"), runs the
// forward at the plan's batch, and compares bf16 with fp32 ("bf16",
// doctor_optimize.h).
ModelProbe probe_model(const std::string& dir, int max_batch, const std::string& optimize,
                       const std::string& kernels = "auto");

// The "model" line for weights of these dtypes ("float32" -> bytes).
CheckResult model_verdict(const std::string& dir, const std::map<std::string, uint64_t>& bytes_by_dtype,
                          size_t tensors);

}  // namespace corepool
