// What `corepool bench` makes of its points, in one include: the summary of
// each configuration over its repeats (bench_summary.h), results.csv and
// results.json (bench_files.h), the gnuplot pictures (bench_plots.h) and the
// verdict in plain words (bench_verdict.h). Pure functions of the points' JSON
// (bench_point.cc), so they are tested without running LibTorch.
#pragma once

#include "supervisor/bench/bench_files.h"
#include "supervisor/bench/bench_plots.h"
#include "supervisor/bench/bench_summary.h"
#include "supervisor/bench/bench_types.h"
#include "supervisor/bench/bench_verdict.h"
