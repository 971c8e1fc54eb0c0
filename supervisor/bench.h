// `corepool bench`: throughput of thread mode through the full pipeline against
// the bare ceiling (N threads in tight forward() loops on the same inputs, no
// pipeline), measured interleaved in one run on the same machine.
#pragma once

#include <string>

#include "config/config.h"

namespace corepool {

struct BenchOptions {
  std::string model_dir;
  int workers = 0;             // 0 = usable cpus
  int max_batch = 4;
  double audio_seconds = 300;  // length of the generated input file
  int repeats = 3;             // interleaved repetitions; the median is reported
  bool pin = true;
};

// Prints the table and the verdict; returns a process exit code.
int run_bench(const BenchOptions& options);

}  // namespace corepool
