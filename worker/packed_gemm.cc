// The packed GEMM of packed_gemm.h: one AVX2 + FMA kernel, compiled for that
// ISA through a target attribute (the rest of corepool is built for plain
// x86-64) and called only after a run-time check of the CPU.
#include "worker/packed_gemm.h"

#include <algorithm>

#include <c10/util/Exception.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace corepool {
namespace {

constexpr int64_t kChunk = 256;  // k per pass: a 256 x 16 sliver of B is 16 KB, in L1

#if defined(__x86_64__)
// C[rows x 16] (=, or += when `add`) A_panel[6 x kc] B[kc x 16]: a is the
// panel's first value of this k chunk, b the sliver's first row.
__attribute__((target("avx2,fma"))) void kernel_6x16(int64_t kc, const float* a, const float* b, int64_t ldb,
                                                     float* c, int64_t ldc, int64_t rows, bool add) {
  // Twelve named accumulators, not an array: GCC keeps an array indexed by
  // the store loop below in memory, and stores it on every k.
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t j = 0; j < kc; ++j) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 ai = _mm256_broadcast_ss(a);
    c00 = _mm256_fmadd_ps(ai, b0, c00);
    c01 = _mm256_fmadd_ps(ai, b1, c01);
    ai = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(ai, b0, c10);
    c11 = _mm256_fmadd_ps(ai, b1, c11);
    ai = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(ai, b0, c20);
    c21 = _mm256_fmadd_ps(ai, b1, c21);
    ai = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(ai, b0, c30);
    c31 = _mm256_fmadd_ps(ai, b1, c31);
    ai = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(ai, b0, c40);
    c41 = _mm256_fmadd_ps(ai, b1, c41);
    ai = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(ai, b0, c50);
    c51 = _mm256_fmadd_ps(ai, b1, c51);
    a += kPanelRows;
    b += ldb;
  }
  const __m256 acc[kPanelRows][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (int64_t i = 0; i < rows; ++i) {
    float* ci = c + i * ldc;
    __m256 lo = acc[i][0], hi = acc[i][1];
    if (add) {
      lo = _mm256_add_ps(lo, _mm256_loadu_ps(ci));
      hi = _mm256_add_ps(hi, _mm256_loadu_ps(ci + 8));
    }
    _mm256_storeu_ps(ci, lo);
    _mm256_storeu_ps(ci + 8, hi);
  }
}

// The same for the last 8 columns where n is not a multiple of 16 (half the
// accumulators: slower per FMA, but no multiplications of padding).
__attribute__((target("avx2,fma"))) void kernel_6x8(int64_t kc, const float* a, const float* b, int64_t ldb,
                                                    float* c, int64_t ldc, int64_t rows, bool add) {
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  for (int64_t j = 0; j < kc; ++j) {
    const __m256 b0 = _mm256_loadu_ps(b);
    c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a), b0, c0);
    c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), b0, c1);
    c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), b0, c2);
    c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), b0, c3);
    c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 4), b0, c4);
    c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 5), b0, c5);
    a += kPanelRows;
    b += ldb;
  }
  const __m256 acc[kPanelRows] = {c0, c1, c2, c3, c4, c5};
  for (int64_t i = 0; i < rows; ++i) {
    float* ci = c + i * ldc;
    _mm256_storeu_ps(ci, add ? _mm256_add_ps(acc[i], _mm256_loadu_ps(ci)) : acc[i]);
  }
}
#endif

}  // namespace

bool packed_gemm_available() {
#if defined(__x86_64__)
  static const bool available = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return available;
#else
  return false;
#endif
}

int64_t packed_floats(int64_t m, int64_t k) { return (m + kPanelRows - 1) / kPanelRows * kPanelRows * k; }

void pack_rows(const float* a, int64_t lda, int64_t m, int64_t k, float* packed) {
  const int64_t panels = (m + kPanelRows - 1) / kPanelRows;
  for (int64_t p = 0; p < panels; ++p) {
    for (int64_t j = 0; j < k; ++j) {
      for (int64_t i = 0; i < kPanelRows; ++i) {
        const int64_t row = p * kPanelRows + i;
        packed[(p * k + j) * kPanelRows + i] = row < m ? a[row * lda + j] : 0.0f;
      }
    }
  }
}

void packed_gemm(const float* packed_a, int64_t m, int64_t k, const float* b, int64_t ldb, int64_t n, float* c,
                 int64_t ldc) {
  TORCH_CHECK(packed_gemm_available(), "packed_gemm: this CPU has no AVX2 + FMA");
  TORCH_CHECK(n % kColumnAlign == 0, "packed_gemm: n = ", n, " is not a multiple of ", kColumnAlign);
#if defined(__x86_64__)
  if (k == 0) {  // an empty sum
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  const int64_t panels = (m + kPanelRows - 1) / kPanelRows;
  for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
    const int64_t kc = std::min(kChunk, k - k0);
    for (int64_t j0 = 0; j0 < n; j0 += kPanelCols) {
      const auto kernel = j0 + kPanelCols <= n ? kernel_6x16 : kernel_6x8;
      for (int64_t p = 0; p < panels; ++p) {
        kernel(kc, packed_a + (p * k + k0) * kPanelRows, b + k0 * ldb + j0, ldb, c + p * kPanelRows * ldc + j0, ldc,
               std::min(kPanelRows, m - p * kPanelRows), k0 > 0);
      }
    }
  }
#endif
}

}  // namespace corepool
