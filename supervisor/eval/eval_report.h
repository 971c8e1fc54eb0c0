// How `corepool eval` shows its numbers: two tables for people (per label,
// then overall), or one JSON object for programs (--json). Undefined rates
// (a zero denominator) are "-" in the tables and null in JSON.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "supervisor/eval/eval.h"
#include "supervisor/eval/sed_metrics.h"

namespace corepool {

struct EvalReport {
  size_t files = 0;
  SedMetrics segment_based;
  SedMetrics event_based;
};

// {"files", "segment_based": {"segment_seconds", "overall", "class_wise": {label: ...}},
//  "event_based": {"t_collar", "percentage_of_length", "overall", "class_wise"}}; each
// metrics object holds the counts (Nref, Nsys, Ntp, Nfp, Nfn, S, D, I) and the rates.
nlohmann::json eval_json(const EvalReport& report, const EvalOptions& options);

std::string eval_tables(const EvalReport& report, const EvalOptions& options);

}  // namespace corepool
