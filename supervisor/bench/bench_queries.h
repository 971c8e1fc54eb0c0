// Questions the report asks of a finished sweep's summaries: which point has
// this configuration, which allocator and worker count the verdict and the
// plots talk about, the lines of a plot. Used by bench_verdict.cc and
// bench_plots.cc; pure functions over the caller's vector (pointers into it).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "supervisor/bench/bench_types.h"

namespace corepool::bench {

using Filter = std::function<bool(const PointSummary&)>;

// printf of up to three numbers into a string (the report's figures).
std::string format(const char* fmt, double a, double b = 0, double c = 0);

// The points of one line of a plot, in order of workers.
std::vector<const PointSummary*> series(const std::vector<PointSummary>& points, const Filter& keep);

// The point of exactly this configuration, or nullptr.
const PointSummary* find_point(const std::vector<PointSummary>& points, const std::string& kind, int workers,
                               int intra, const std::string& allocator);

// jemalloc if measured, else the first point's allocator.
std::string main_allocator(const std::vector<PointSummary>& points);

// The worker count the verdict talks about: the usable cpus if measured, else the nearest below.
int reference_workers(const std::vector<PointSummary>& points, int usable);

int max_workers(const std::vector<PointSummary>& points);

// The intra-op settings measured for `kind`, ascending.
std::vector<int> intra_settings(const std::vector<PointSummary>& points, const std::string& kind);

}  // namespace corepool::bench
