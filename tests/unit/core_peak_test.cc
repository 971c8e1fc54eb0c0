// The roofline's roof (supervisor/bench/core_peak.cc): the ISA it drives is
// the one /proc/cpuinfo lists, and the peak is far above what one dependent
// scalar FMA chain (written here) reaches on the same core, as twelve
// independent vector chains must be. The AMX tile unit, where there is one,
// is checked the same way.
#include "supervisor/bench/core_peak.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace corepool {
namespace {

bool cpu_flag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) {
      if (w == flag) return true;
    }
    return false;
  }
  return false;
}

// One dependent chain: every multiply-add waits for the one before.
double scalar_chain_gflops() {
  volatile double seed = 1.0;
  double x = seed;
  const auto t0 = std::chrono::steady_clock::now();
  long n = 0;
  double elapsed = 0;
  while (elapsed < 0.1) {
    for (int i = 0; i < 100000; ++i) x = std::fma(x, 0.999999, 1e-7);
    n += 100000;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  seed = x;
  return n * 2.0 / elapsed / 1e9;
}

TEST(CorePeakTest, DrivesTheWidestUnitTheCpuHas) {
  const CorePeak peak = measure_core_peak(0.05);
  if (cpu_flag("avx512f")) {
    EXPECT_EQ(peak.fp32_isa, "avx512");
  } else if (cpu_flag("avx2") && cpu_flag("fma")) {
    EXPECT_EQ(peak.fp32_isa, "avx2");
  } else {
    EXPECT_EQ(peak.fp32_gflops, 0);
  }
  // AMX only where Linux grants this process the tile registers (asked here
  // as the kernel's documentation says: arch_prctl ARCH_REQ_XCOMP_PERM, 18).
  const bool amx = cpu_flag("amx_bf16") && cpu_flag("amx_tile") && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  if (amx) {
    EXPECT_EQ(peak.bf16_isa, "amx");
  } else if (cpu_flag("avx512_bf16")) {
    EXPECT_EQ(peak.bf16_isa, "avx512_bf16");
  } else {
    EXPECT_EQ(peak.bf16_isa, "");
  }
  EXPECT_EQ(peak.bf16_gflops > 0, !peak.bf16_isa.empty());
}

TEST(CorePeakTest, PeakIsFarAboveOneDependentScalarChain) {
  const CorePeak peak = measure_core_peak(0.05);
  if (peak.fp32_gflops == 0) GTEST_SKIP() << "no FMA unit this measures";
  const double scalar = scalar_chain_gflops();
  // 8 or 16 lanes x 12 chains: even on a loaded machine, well over 8x.
  EXPECT_GT(peak.fp32_gflops, 8 * scalar) << "peak " << peak.fp32_gflops << " scalar " << scalar;
  if (peak.bf16_gflops > 0) {
    EXPECT_GT(peak.bf16_gflops, 8 * scalar);
  }
}

TEST(CorePeakTest, PeakIsBelowWhatTheHardwareCouldDoAtAll) {
  // 6 GHz x 2 FMA pipes x lanes x 2 flop: a figure over this means the loop
  // did not run (a compiler that hoisted it out of the timing).
  const CorePeak peak = measure_core_peak(0.05);
  const double lanes = peak.fp32_isa == "avx512" ? 16 : 8;
  EXPECT_LT(peak.fp32_gflops, 6 * 2 * lanes * 2);
  // AMX: one 16x16x32 tile product (16384 flop) per 16 cycles on Sapphire
  // Rapids; the bound allows twice that.
  EXPECT_LT(peak.bf16_gflops, peak.bf16_isa == "amx" ? 6 * 2 * 1024 : 6 * 2 * 16 * 4);
}

}  // namespace
}  // namespace corepool
