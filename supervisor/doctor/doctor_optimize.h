// The doctor's engine.optimize checks: the plan the service would make for
// this model (optimization applied or why not, the measured batch size), and
// bfloat16 against fp32 on audio with known labels, so that an operator sees
// what `optimize = "bf16"` would cost in accuracy before turning it on.
// Called by probe_model (doctor_model.cc).
#pragma once

#include <memory>
#include <string>

#include "supervisor/doctor/doctor_check.h"
#include "worker/engine_plan.h"

namespace corepool {

// "engine plan": OK with the plan's text, WARN when the optimization fell back,
// FAIL when engine.kernels names a path this CPU cannot run.
// Optimizes `model` in place (as the service would before its engines start).
CheckResult plan_check(const std::shared_ptr<const LoadedModel>& model, const std::string& optimize,
                       const std::string& kernels, int max_batch, EnginePlan& plan);

// "kernels": the path the plan's layers run on (engine.kernels), and every
// path this CPU runs, with why for each it cannot.
CheckResult kernels_check(const EnginePlan& plan);

// "bf16": bf16 vs fp32 as `corepool bench --bf16-agreement` measures it
// (supervisor/bench/bench_agreement.h); OK when labels agree on >= 99 % of the
// held-out and demo decisions together, else WARN.
CheckResult bf16_check(const std::string& dir);

}  // namespace corepool
