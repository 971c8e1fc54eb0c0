// corepool's packed GEMM (worker/packed_gemm.h) against a naive triple loop
// in double: row counts around the 6-row panel, k around the 256 chunk,
// n with and without a final 8-column panel, row strides wider than the
// matrices, and an empty sum.
#include <random>
#include <vector>

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include "worker/packed_gemm.h"

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

}  // namespace
}  // namespace corepool
