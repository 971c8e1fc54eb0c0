// The bare ceilings of `corepool bench`: N tight forward() loops on ready
// features, no pipeline, no IPC, in threads of this process or in forked
// processes. Called by bench_point.cc for the ceiling kinds; the model must
// already be planned (optimized, batch chosen) as the pipeline would run it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "supervisor/bench/resource_probe.h"
#include "worker/model/model.h"

namespace corepool {

struct CeilingRun {
  int workers = 1;
  int batch = 1;                      // items per forward(): the plan's batch
  int intra_op = 1;                   // processes: each child's own intra-op pool
  std::vector<int> cpus;              // pin loop i to cpus[i % size]; empty = no pinning
  std::vector<std::vector<float>> inputs;  // `batch` segments, the same for every forward()
  uint64_t segments = 0;              // the work: forwards run until this many segments are done
};

struct CeilingResult {
  uint64_t segments = 0;              // segments actually run (whole batches)
  std::vector<double> forward_ms;     // each forward() of one batch
};

// Both build their engines and run warm-up forwards before the clock starts
// (a barrier), then take batches from one shared counter until the work is
// done; the clock stops when the last batch is done.
CeilingResult ceiling_threads(const std::shared_ptr<const LoadedModel>& model, const CeilingRun& run,
                              ResourceProbe& probe);
CeilingResult ceiling_processes(const std::shared_ptr<const LoadedModel>& model, const CeilingRun& run,
                                ResourceProbe& probe);

}  // namespace corepool
