// The kinds of point and a configuration's label: the names that --modes,
// the sweep's progress lines and the verdict print.
#include "supervisor/bench/bench_types.h"

namespace corepool {

const std::vector<std::string> kBenchKinds = {"ceiling-threads", "ceiling-processes", "thread", "process",
                                              "defaults", "plain", "bf16"};

std::string SweepPoint::label() const {
  const std::string intra = intra_op == 0 ? "default" : std::to_string(intra_op);
  return kind + " w" + std::to_string(workers) + " intra " + intra + " " + allocator;
}

}  // namespace corepool
