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

// "engine plan": OK with the plan's text, WARN when the optimization fell back.
// Optimizes `model` in place (as the service would before its engines start).
CheckResult plan_check(const std::shared_ptr<const LoadedModel>& model, const std::string& optimize, int max_batch,
                       EnginePlan& plan);

struct Bf16Agreement {
  size_t segments = 0;
  double label_agreement = 0;  // share of (segment, label) decisions equal at the model's thresholds
  double max_difference = 0;   // max |bf16 - fp32| over every score
};

// bf16 vs onednn (fp32) on two fresh loads of `dir`, over the tagger's held-out
// set (12 segments a class) and the demo file's segments. Throws what loading,
// synthesis (espeak-ng) or forward() throws.
Bf16Agreement measure_bf16_agreement(const std::string& dir);

// "bf16": OK with the agreement when labels agree on >= 99 %, else WARN.
CheckResult bf16_check(const std::string& dir);

}  // namespace corepool
