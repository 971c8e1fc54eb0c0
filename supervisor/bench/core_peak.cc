// Twelve independent accumulator chains keep every FMA pipe busy despite the
// FMA latency (4 cycles on current x86 cores, two pipes: eight chains would
// do, twelve leave margin). Values stay bounded (a * 0.999999 + 1e-7), so no
// denormals or infinities slow the loop down.
#include "supervisor/bench/core_peak.h"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <chrono>

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kChains = 12;  // COREPOOL_TWELVE below
constexpr long kInner = 1 << 16;  // iterations between clock reads

// The loops are pure functions: without a start value the compiler cannot
// know and a result it must store, it would run them once and reuse the value.
volatile float g_seed = 1.0f;
volatile float g_sink;

template <class Body>
double gflops_of(double seconds, double flop_per_iteration, Body body) {
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    long iterations = 0;
    const auto t0 = Clock::now();
    double elapsed = 0;
    while (elapsed < seconds) {
      body(kInner);
      iterations += kInner;
      elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    best = std::max(best, iterations * flop_per_iteration / elapsed / 1e9);
  }
  return best;
}

// Twelve named accumulators, not an array: GCC keeps an array whose address
// escapes in memory, and the loop then measures store forwarding, not FMAs.
#define COREPOOL_TWELVE(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

// Not _mm512_reduce_add_ps: GCC 12 warns inside it (-Wuninitialized).
__attribute__((target("avx512f"))) float lanes_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0;
  for (float x : lanes) sum += x;
  return sum;
}

__attribute__((target("avx512f"))) float fma512(long n, float seed) {
#define DECLARE(i) __m512 acc##i = _mm512_set1_ps(seed + i * 1e-3f);
  COREPOOL_TWELVE(DECLARE)
#undef DECLARE
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long k = 0; k < n; ++k) {
#define STEP(i) acc##i = _mm512_fmadd_ps(acc##i, a, b);
    COREPOOL_TWELVE(STEP)
#undef STEP
  }
#define SUM(i) +lanes_sum(acc##i)
  return 0 COREPOOL_TWELVE(SUM);
#undef SUM
}

__attribute__((target("avx2,fma"))) float lanes_sum(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  float sum = 0;
  for (float x : lanes) sum += x;
  return sum;
}

__attribute__((target("avx2,fma"))) float fma256(long n, float seed) {
#define DECLARE(i) __m256 acc##i = _mm256_set1_ps(seed + i * 1e-3f);
  COREPOOL_TWELVE(DECLARE)
#undef DECLARE
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long k = 0; k < n; ++k) {
#define STEP(i) acc##i = _mm256_fmadd_ps(acc##i, a, b);
    COREPOOL_TWELVE(STEP)
#undef STEP
  }
#define SUM(i) +lanes_sum(acc##i)
  return 0 COREPOOL_TWELVE(SUM);
#undef SUM
}

// vdpbf16ps: 16 lanes, each a 2-element bf16 dot product added to fp32 = 4 flop.
__attribute__((target("avx512f,avx512bf16"))) float dpbf16(long n, float seed) {
#define DECLARE(i) __m512 acc##i = _mm512_set1_ps(seed + i * 1e-3f);
  COREPOOL_TWELVE(DECLARE)
#undef DECLARE
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3380);  // bf16 6e-8
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3f80);  // bf16 1.0
  for (long k = 0; k < n; ++k) {
#define STEP(i) acc##i = _mm512_dpbf16_ps(acc##i, a, b);
    COREPOOL_TWELVE(STEP)
#undef STEP
  }
#define SUM(i) +lanes_sum(acc##i)
  return 0 COREPOOL_TWELVE(SUM);
#undef SUM
}

// AMX: a tile multiply (tdpbf16ps) adds a 16x32 by 32x16 bf16 product into
// 16x16 fp32, 16 * 16 * 32 * 2 = 16384 flop. Four accumulator tiles, each fed
// by one of two A and two B tiles, so that no multiply waits for the one before.
// Linux hands out the tile registers only to a process that asks (5.16+).
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;
constexpr double kAmxFlopPerIteration = 4 * 16 * 16 * 32 * 2.0;

bool amx_permitted() { return ::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0; }

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

__attribute__((target("amx-tile,amx-bf16"))) float amx_bf16(long n, float seed) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;  // 16 fp32 or 32 bf16
    config.rows[t] = 16;
  }
  alignas(64) uint16_t operand[16 * 32];
  const uint16_t small = seed > 0 ? 0x3380 : 0;  // bf16 6e-8: sums stay small
  for (auto& x : operand) x = small;
  alignas(64) float out[16 * 16];
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  for (long k = 0; k < n; ++k) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

// cpuid itself: GCC 12's __builtin_cpu_supports("amx-bf16") compiles but
// answers 0 on a CPU that has it (checked on the AMX Xeon).
bool cpu_has_amx_bf16() {
  // cpuid leaf 7: EDX bit 22 is AMX-BF16, bit 24 AMX-TILE.
  unsigned a, b, c, d;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  return (d >> 22 & 1) && (d >> 24 & 1);
}

}  // namespace

CorePeak measure_core_peak(double seconds) {
  CorePeak peak;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    peak.fp32_isa = "avx512";
    peak.fp32_gflops = gflops_of(seconds, kChains * 16 * 2.0, [](long n) { g_sink = fma512(n, g_seed); });
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    peak.fp32_isa = "avx2";
    peak.fp32_gflops = gflops_of(seconds, kChains * 8 * 2.0, [](long n) { g_sink = fma256(n, g_seed); });
  }
  peak.bf16_isa = native_bf16_isa();
  if (peak.bf16_isa == "amx") {
    peak.bf16_gflops = gflops_of(seconds, kAmxFlopPerIteration, [](long n) { g_sink = amx_bf16(n, g_seed); });
  } else if (peak.bf16_isa == "avx512_bf16") {
    peak.bf16_gflops = gflops_of(seconds, kChains * 16 * 4.0, [](long n) { g_sink = dpbf16(n, g_seed); });
  }
  return peak;
}

std::string native_bf16_isa() {
  __builtin_cpu_init();
  // The widest bf16 unit, as for fp32: oneDNN runs bf16 convolutions on AMX
  // tiles where it may, and AMX does 8-16x the work of AVX512_BF16 per cycle.
  if (cpu_has_amx_bf16() && amx_permitted()) return "amx";
  if (__builtin_cpu_supports("avx512bf16")) return "avx512_bf16";
  return "";
}

}  // namespace corepool
