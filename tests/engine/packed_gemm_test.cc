// corepool's packed GEMM (worker/kernels/packed_gemm.h) against a naive triple loop
// in double: row counts around the 6-row panel, k around the 256 chunk,
// n with and without a final 8-column panel, row strides wider than the
// matrices, and an empty sum; and the same kernel as a linear layer
// (packed_linear) with bias, ReLU and partial panels.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include "worker/kernels/packed_gemm.h"

namespace corepool {
namespace {

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(PackedGemmTest, EqualsANaiveProductOnEveryEdge) {
  if (!packed_gemm_available()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: corepool uses oneDNN's sgemm instead";
  std::mt19937 rng(20261127);
  for (int64_t m : {1, 5, 6, 7, 20, 66}) {
    for (int64_t k : {1, 3, 64, 256, 257, 600}) {
      for (int64_t n : {8, 16, 24, 40}) {
        const int64_t lda = k + 3, ldb = n + 5, ldc = n + 7;
        const std::vector<float> a = random_floats(m * lda, rng), b = random_floats(k * ldb, rng);
        std::vector<float> packed(packed_floats(m, k)), c(m * ldc, 42.0f);
        pack_rows(a.data(), lda, m, k, packed.data());
        packed_gemm(packed.data(), m, k, b.data(), ldb, n, c.data(), ldc);
        double worst = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double want = 0;
            for (int64_t x = 0; x < k; ++x) want += static_cast<double>(a[i * lda + x]) * b[x * ldb + j];
            worst = std::max(worst, std::abs(want - c[i * ldc + j]));
          }
          for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], 42.0f) << "wrote past column n";
        }
        EXPECT_LE(worst, 1e-5 * std::max<int64_t>(k, 16)) << m << " x " << k << " x " << n;
      }
    }
  }
}

TEST(PackedGemmTest, AnEmptySumIsZerosAndABadWidthIsAnError) {
  if (!packed_gemm_available()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: corepool uses oneDNN's sgemm instead";
  std::vector<float> packed(packed_floats(7, 0)), b(1), c(7 * 8, 1.0f);
  packed_gemm(packed.data(), 7, 0, b.data(), 8, 8, c.data(), 8);
  for (float x : c) EXPECT_EQ(x, 0.0f);
  std::vector<float> a(6 * 4, 1.0f), pa(packed_floats(6, 4)), bb(4 * 12, 1.0f), cc(6 * 12);
  pack_rows(a.data(), 4, 6, 4, pa.data());
  EXPECT_THROW(packed_gemm(pa.data(), 6, 4, bb.data(), 12, 12, cc.data(), 12), c10::Error) << "12 columns";
}

// packed_linear (y = x W^T + b, ReLU) against the same in double: every row
// count of the 6-row kernels and past it, k around the 256 chunk, outputs in
// 8-column panels (3, 8) and 16-column ones with a partial last panel, a
// panel range at a time, row strides wider than the rows.
TEST(PackedGemmTest, PackedLinearEqualsANaiveLayerOnEveryEdge) {
  if (!packed_gemm_available()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: corepool uses oneDNN instead";
  std::mt19937 rng(20261128);
  for (int64_t rows : {1, 2, 3, 4, 5, 6, 7, 13}) {
    for (int64_t k : {1, 64, 256, 300}) {
      for (int64_t n : {3, 8, 16, 21, 40}) {
        for (bool relu : {false, true}) {
          const int64_t ldx = k + 2, ldy = n + 9, panels = weight_panels(n);
          const std::vector<float> x = random_floats(rows * ldx, rng), w = random_floats(n * k, rng),
                                   bias = random_floats(n, rng);
          std::vector<float> packed(packed_weight_floats(n, k)), y(rows * ldy, 42.0f);
          pack_weight_columns(w.data(), k, n, k, packed.data());
          // Two calls, as two threads would make them: panel 0, then the rest.
          packed_linear(x.data(), ldx, rows, k, packed.data(), n, bias.data(), relu, y.data(), ldy, 0, 1);
          packed_linear(x.data(), ldx, rows, k, packed.data(), n, bias.data(), relu, y.data(), ldy, 1, panels);
          double worst = 0;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t o = 0; o < n; ++o) {
              double want = bias[o];
              for (int64_t i = 0; i < k; ++i) want += static_cast<double>(x[r * ldx + i]) * w[o * k + i];
              if (relu) want = std::max(want, 0.0);
              worst = std::max(worst, std::abs(want - y[r * ldy + o]));
            }
            for (int64_t o = n; o < ldy; ++o) ASSERT_EQ(y[r * ldy + o], 42.0f) << "wrote past output n";
          }
          EXPECT_LE(worst, 1e-5 * std::max<int64_t>(k, 16)) << rows << " x " << k << " x " << n << " relu " << relu;
        }
      }
    }
  }
}

TEST(PackedGemmTest, PackedLinearWithoutBiasAndABadPanelRange) {
  if (!packed_gemm_available()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: corepool uses oneDNN instead";
  const std::vector<float> x(2 * 3, 1.0f), w(5 * 3, 2.0f);
  std::vector<float> packed(packed_weight_floats(5, 3)), y(2 * 5, 0.0f);
  pack_weight_columns(w.data(), 3, 5, 3, packed.data());
  packed_linear(x.data(), 3, 2, 3, packed.data(), 5, nullptr, false, y.data(), 5, 0, 1);
  for (float v : y) EXPECT_EQ(v, 6.0f);
  EXPECT_THROW(packed_linear(x.data(), 3, 2, 3, packed.data(), 5, nullptr, false, y.data(), 5, 0, 2), c10::Error)
      << "5 outputs are one panel";
}

}  // namespace
}  // namespace corepool
