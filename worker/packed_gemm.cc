// The packed GEMM of packed_gemm.h: one AVX2 + FMA kernel, compiled for that
// ISA through a target attribute (the rest of corepool is built for plain
// x86-64) and called only after a run-time check of the CPU.
#include "worker/packed_gemm.h"

#include <algorithm>
#include <vector>

#include <c10/util/Exception.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace corepool {
namespace {

constexpr int64_t kChunk = 256;  // k per pass: a 256 x 16 sliver of B is 16 KB, in L1

#if defined(__x86_64__)
// How a kernel puts 8 of its accumulated columns at c + off (off 0 or 8).
// Two policies, so that Winograd's products keep the plain store in their
// kernel (with the masks and checks below, 36 products of CNN10-like shapes
// ran 3-29 % slower in an uncommitted A/B harness).

// Winograd's products: whole vectors, stored, or added after the first k chunk.
struct WholeStore {
  bool add;
  __attribute__((target("avx2,fma"), always_inline)) void put(float* c, int64_t, __m256 acc) const {
    _mm256_storeu_ps(c, add ? _mm256_add_ps(acc, _mm256_loadu_ps(c)) : acc);
  }
};

// Lanes [0, n) of 8 set: the mask of a partial vector's load and store.
__attribute__((target("avx2"))) __m256i first_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<int64_t>(n, 0, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// A linear layer's outputs: only its `cols` columns exist (the rest are
// neither read nor written); on the last k chunk a bias per column and a ReLU.
struct LayerStore {
  int64_t cols;                 // 1 .. the kernel's width
  bool add = false;             // C += the block (a k chunk after the first)
  const float* bias = nullptr;  // the block's first column's bias
  bool relu = false;
  __attribute__((target("avx2,fma"), always_inline)) void put(float* c, int64_t off, __m256 acc) const {
    const int64_t n = cols - off;
    if (n <= 0) return;
    if (n >= 8) {
      if (add) acc = _mm256_add_ps(acc, _mm256_loadu_ps(c));
      if (bias) acc = _mm256_add_ps(acc, _mm256_loadu_ps(bias + off));
      if (relu) acc = _mm256_max_ps(acc, _mm256_setzero_ps());
      _mm256_storeu_ps(c, acc);
      return;
    }
    const __m256i mask = first_lanes(n);
    if (add) acc = _mm256_add_ps(acc, _mm256_maskload_ps(c, mask));
    if (bias) acc = _mm256_add_ps(acc, _mm256_maskload_ps(bias + off, mask));
    if (relu) acc = _mm256_max_ps(acc, _mm256_setzero_ps());
    _mm256_maskstore_ps(c, mask, acc);
  }
};

// C[rows x 16] (=, or +=: the policy Out) A_panel[6 x kc] B[kc x 16]: a is
// the panel's first value of this k chunk, b the sliver's first row.
template <typename Out>
__attribute__((target("avx2,fma"))) void kernel_6x16(int64_t kc, const float* a, const float* b, int64_t ldb,
                                                     float* c, int64_t ldc, int64_t rows, const Out& out) {
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
    out.put(ci, 0, acc[i][0]);
    out.put(ci + 8, 8, acc[i][1]);
  }
}

// The same for the last 8 columns where n is not a multiple of 16 (half the
// accumulators: slower per FMA, but no multiplications of padding).
__attribute__((target("avx2,fma"))) void kernel_6x8(int64_t kc, const float* a, const float* b, int64_t ldb,
                                                    float* c, int64_t ldc, int64_t rows, const WholeStore& out) {
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
  for (int64_t i = 0; i < rows; ++i) out.put(c + i * ldc, 0, acc[i]);
}
#endif

// Panels of `width` rows of A (m x k): packed[(p * k + j) * width + i] =
// A[p * width + i][j], zeros past row m. Rows are read in order, one panel
// at a time, so that a weight matrix larger than the caches streams once.
void pack_panels(const float* a, int64_t lda, int64_t m, int64_t k, int64_t width, float* packed) {
  const int64_t panels = (m + width - 1) / width;
  for (int64_t p = 0; p < panels; ++p) {
    float* panel = packed + p * k * width;
    for (int64_t i = 0; i < width; ++i) {
      const int64_t row = p * width + i;
      for (int64_t j = 0; j < k; ++j) panel[j * width + i] = row < m ? a[row * lda + j] : 0.0f;
    }
  }
}

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
  pack_panels(a, lda, m, k, kPanelRows, packed);
}

int64_t packed_weight_floats(int64_t n, int64_t k) { return (n + kPanelCols - 1) / kPanelCols * kPanelCols * k; }

void pack_weight_columns(const float* w, int64_t ldw, int64_t n, int64_t k, float* packed) {
  pack_panels(w, ldw, n, k, kPanelCols, packed);
}

void packed_linear(const float* x, int64_t ldx, int64_t rows, int64_t k, const float* packed_w, int64_t n,
                   const float* bias, bool relu, float* y, int64_t ldy, int64_t panel_begin, int64_t panel_end) {
  TORCH_CHECK(packed_gemm_available(), "packed_linear: this CPU has no AVX2 + FMA");
  TORCH_CHECK(k > 0 && n > 0 && 0 <= panel_begin && panel_begin <= panel_end &&
                  panel_end <= (n + kPanelCols - 1) / kPanelCols,
              "packed_linear: bad shape or panel range");
#if defined(__x86_64__)
  if (rows <= 0) return;
  const int64_t row_panels = (rows + kPanelRows - 1) / kPanelRows;
  // This k chunk of x in row panels: at most rows (rounded up) x 256 floats,
  // packed once per chunk and read from L1 by every panel of W.
  thread_local std::vector<float> x_chunk;
  x_chunk.resize(static_cast<size_t>(row_panels * kPanelRows * kChunk));
  for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
    const int64_t kc = std::min(kChunk, k - k0);
    pack_panels(x + k0, ldx, rows, kc, kPanelRows, x_chunk.data());
    const bool last = k0 + kc == k;
    for (int64_t q = panel_begin; q < panel_end; ++q) {
      const int64_t col = q * kPanelCols;
      LayerStore store{std::min(kPanelCols, n - col)};
      store.add = k0 > 0;
      store.bias = last && bias ? bias + col : nullptr;
      store.relu = last && relu;
      const float* sliver = packed_w + (q * k + k0) * kPanelCols;
      for (int64_t p = 0; p < row_panels; ++p) {
        kernel_6x16(kc, x_chunk.data() + p * kc * kPanelRows, sliver, kPanelCols, y + p * kPanelRows * ldy + col,
                    ldy, std::min(kPanelRows, rows - p * kPanelRows), store);
      }
    }
  }
#endif
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
      const auto kernel = j0 + kPanelCols <= n ? kernel_6x16<WholeStore> : kernel_6x8;
      const WholeStore store{k0 > 0};
      for (int64_t p = 0; p < panels; ++p) {
        kernel(kc, packed_a + (p * k + k0) * kPanelRows, b + k0 * ldb + j0, ldb, c + p * kPanelRows * ldc + j0, ldc,
               std::min(kPanelRows, m - p * kPanelRows), store);
      }
    }
  }
#endif
}

}  // namespace corepool
