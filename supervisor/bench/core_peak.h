// The roofline's roof: how many floating-point operations one core of this
// CPU can do per second, measured with a register-only FMA loop (no memory
// traffic), in fp32 and, where the CPU has them, in bf16 on AMX tiles or in
// AVX512_BF16 dot products.
// `corepool bench` sets every throughput next to it: a kernel at this peak
// cannot be made faster by any library, only by doing less work. No LibTorch.
#pragma once

#include <string>

namespace corepool {

struct CorePeak {
  double fp32_gflops = 0;  // 0: no FMA unit we know how to drive
  std::string fp32_isa;    // "avx512" | "avx2" | ""
  double bf16_gflops = 0;  // 0: neither AMX-BF16 nor AVX512_BF16
  std::string bf16_isa;    // "amx" | "avx512_bf16" | ""
};

// One thread, about `seconds` per kind, best of three rounds.
CorePeak measure_core_peak(double seconds = 0.2);

// The bf16 unit measure_core_peak() would drive, without measuring it:
// "amx" (AMX-BF16 tiles the kernel lets us use), "avx512_bf16", or "" where
// the CPU has neither and oneDNN emulates bf16 (0.02-0.4x fp32's speed).
std::string native_bf16_isa();

}  // namespace corepool
