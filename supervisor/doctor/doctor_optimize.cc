// The plan as the service makes it, and bf16's cost in answers as the bench
// measures it (one measurement, supervisor/bench/bench_agreement.h).
#include "supervisor/doctor/doctor_optimize.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "supervisor/bench/bench_agreement.h"
#include "worker/kernels/kernel_path.h"

namespace corepool {

CheckResult plan_check(const std::shared_ptr<const LoadedModel>& model, const std::string& optimize,
                       const std::string& kernels, int max_batch, EnginePlan& plan) {
  try {
    plan = plan_engine(model, {optimize, max_batch, 1024, false, {}, kernels});
  } catch (const std::invalid_argument& e) {  // an engine.kernels path this CPU cannot run
    plan.max_batch = std::max(1, max_batch);
    return CheckResult::fail("engine plan", e.what(), "set engine.kernels to a path this CPU runs (auto always does)");
  }
  if (!plan.optimize.fallback.empty()) {
    return CheckResult::warn("engine plan", plan.text() + ": " + plan.optimize.fallback,
                             "the model runs as loaded; see the reason (engine.optimize = \"none\" silences this)");
  }
  return CheckResult::ok("engine plan", plan.text());
}

CheckResult kernels_check(const EnginePlan& plan) {
  std::string runs, not_here;
  for (const std::string& name : kernel_path_names()) {
    const std::string why = kernel_path_unavailable(*parse_kernel_path(name));
    if (why.empty()) {
      runs += (runs.empty() ? "" : ", ") + name;
    } else {
      not_here += "; not " + name + ": " + why;
    }
  }
  const std::string in_use = plan.optimize.applied == "none" ? "torch (engine.optimize = none)" : plan.optimize.kernels;
  return CheckResult::ok("kernels", "in use: " + in_use + " (engine.kernels = " + plan.optimize.kernels_requested +
                                        "); this CPU runs engine.kernels = " + runs + not_here);
}

// doctor is a quick check: bf16's answers are compared for at most this long
// (plus one batch). Where bf16 is emulated (no AVX512_BF16 or AMX) CNN10
// costs about 0.6 s per segment, and the full sets would take minutes.
constexpr std::chrono::seconds kBf16Budget{10};

CheckResult bf16_check(const std::string& dir) {
  try {
    const Bf16Agreement r = measure_bf16_agreement(dir, std::chrono::steady_clock::now() + kBf16Budget);
    const uint64_t segments = r.held_out.segments + r.demo.segments;
    const uint64_t labels = r.held_out.labels + r.demo.labels, equal = r.held_out.equal + r.demo.equal;
    const double agreement = labels ? double(equal) / labels : 0.0;
    char found[240];
    std::snprintf(found, sizeof found, "bf16 vs fp32 on %llu held-out and demo segments%s: labels agree %.1f%%, "
                  "max |score difference| %.2g", static_cast<unsigned long long>(segments),
                  r.cut_short() ? (" of " + std::to_string(r.planned) + " (10 s budget: bf16 is slow on this CPU; "
                                   "corepool bench --bf16-agreement measures all)").c_str()
                                : "",
                  100 * agreement, std::max(r.held_out.max_diff, r.demo.max_diff));
    if (agreement >= 0.99) return CheckResult::ok("bf16", found);
    return CheckResult::warn("bf16", found, "keep engine.optimize = \"onednn\" for this model");
  } catch (const std::exception& e) {
    return CheckResult::warn("bf16", std::string("not measured: ") + e.what(),
                             "install espeak-ng (the held-out speech) or check the model");
  }
}

}  // namespace corepool
