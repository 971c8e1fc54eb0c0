// results.csv and results.json of `corepool bench`: written at the end of a
// sweep, and results.json read back by `--replot` to redraw without measuring.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "supervisor/bench/bench_types.h"

namespace corepool {

// Reads back what write_json wrote (for --replot); fills `host`.
std::vector<PointSummary> read_json(const std::string& path, nlohmann::json* host);

void write_csv(const std::string& path, const std::vector<PointSummary>& points);
void write_json(const std::string& path, const nlohmann::json& host, const std::vector<PointSummary>& points,
                const std::vector<std::string>& verdict);

}  // namespace corepool
