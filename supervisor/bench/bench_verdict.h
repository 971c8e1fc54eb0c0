// The verdict of `corepool bench`: the sweep's findings in plain words, each
// ratio naming its reference (a ceiling, the other mode, intra-op 1, glibc).
// Printed after the table and kept in results.json.
#pragma once

#include <string>
#include <vector>

#include "supervisor/bench/bench_types.h"

namespace corepool {

// Plain-words findings: each ratio names its reference.
std::vector<std::string> verdict(const std::vector<PointSummary>& points, int usable_cpus);

}  // namespace corepool
