// The pictures of `corepool bench`, drawn by gnuplot: processing time and CPU
// use against engine threads, throughput of both modes against the bare
// ceilings, and memory over one run per allocator. Called at the end of a
// sweep and by --replot.
#pragma once

#include <string>
#include <vector>

#include "supervisor/bench/bench_types.h"

namespace corepool {

// Writes DIR/<name>.gp and renders DIR/<name>.png with gnuplot for every plot
// the points allow. Returns the PNG paths; throws with gnuplot's complaint if
// it fails, or if gnuplot is not installed.
std::vector<std::string> write_plots(const std::string& dir, const std::vector<PointSummary>& points,
                                     double audio_seconds, int usable_cpus);

}  // namespace corepool
