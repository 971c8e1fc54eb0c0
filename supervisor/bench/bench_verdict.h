// The verdict of `corepool bench`: the sweep's findings in plain words, each
// ratio naming its reference (a ceiling, the other mode, intra-op 1, glibc).
// Printed after the table and kept in results.json.
#pragma once

#include <string>
#include <vector>

#include "supervisor/bench/bench_types.h"

namespace corepool {

// The roofline of this run (core_peak.h, model_flops.h); zeros = not measured.
struct Roofline {
  double flop_per_segment = 0;  // forward() of one item, model as loaded
  double fp32_gflops = 0;       // one core's measured peak
  std::string fp32_isa;
  double bf16_gflops = 0;       // 0: the CPU has neither AMX-BF16 nor AVX512_BF16
  std::string bf16_isa;         // "amx" | "avx512_bf16"
};

// Plain-words findings: each ratio names its reference.
std::vector<std::string> verdict(const std::vector<PointSummary>& points, int usable_cpus,
                                 const Roofline& roofline = {});

}  // namespace corepool
