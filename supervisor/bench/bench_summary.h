// One configuration's repeats made into one summary: medians and spread of the
// points' JSON (bench_point.cc), what each latency figure times, and the table
// printed at the end of a sweep. Used by `corepool bench` and `corepool tune`.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "supervisor/bench/bench_types.h"

namespace corepool {

// Medians over `runs` (each a point's JSON); `hop_seconds` turns segments into audio.
PointSummary summarize(const SweepPoint& point, const std::vector<nlohmann::json>& runs, double hop_seconds);

// What each latency figure times, by kind.
std::string latency_meaning(const std::string& kind);

// The table printed at the end of a sweep.
void print_summary_table(const std::vector<PointSummary>& points);

}  // namespace corepool
