// The work in one forward(): floating-point operations per segment, counted by
// LibTorch's own profiler (its FLOP formulas for conv, matmul, addmm, add, mul)
// on the module as loaded, so the count does not depend on how corepool
// optimizes it. With core_peak.h it gives the roofline `corepool bench` prints.
#pragma once

#include "worker/model/model.h"

namespace corepool {

// FLOP of one item (batch 1) through the model as loaded. Runs one forward
// on this thread; throws std::runtime_error when the profiler counts nothing
// (a model made only of ops it has no formula for).
double count_flop_per_segment(const LoadedModel& model);

}  // namespace corepool
