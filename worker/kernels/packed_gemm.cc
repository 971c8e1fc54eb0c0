// The packed GEMM of packed_gemm.h: one AVX2 + FMA kernel, compiled for that
// ISA through a target attribute (the rest of corepool is built for plain
// x86-64) and called only after a run-time check of the CPU.
#include "worker/kernels/packed_gemm.h"

#include <algorithm>

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

// A linear layer's block: Y[R x C] = X[R x kc] W_sliver[kc x C] with X's R
// rows (R <= 6, fixed at compile time) read where they are, x pointing at the
// first row's value for this k chunk: no packing of x, whose cost per k chunk
// outweighed the products where the layer has few outputs. C is 16, or 8 for
// a layer of at most 8 outputs (16 would read twice the weights it needs).
template <int R, int C>
__attribute__((target("avx2,fma"))) void kernel_rows(int64_t kc, const float* x, int64_t ldx, const float* b,
                                                     float* c, int64_t ldc, const LayerStore& out) {
  static_assert(R >= 1 && R <= kPanelRows && (C == 8 || C == 16), "1 to 6 rows, 8 or 16 columns");
  // Rows past R alias row 0: never read (the `if constexpr` below), but valid.
  const float* x0 = x;
  const float* x1 = R > 1 ? x + ldx : x;
  const float* x2 = R > 2 ? x + 2 * ldx : x;
  const float* x3 = R > 3 ? x + 3 * ldx : x;
  const float* x4 = R > 4 ? x + 4 * ldx : x;
  const float* x5 = R > 5 ? x + 5 * ldx : x;
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  // One row's pair of accumulators: += x_i[j] * the sliver's row j.
  auto fma_row = [](const float* xi, __m256 b0, __m256 b1, __m256& lo, __m256& hi)
                     __attribute__((always_inline, target("avx2,fma"))) {
    const __m256 ai = _mm256_broadcast_ss(xi);
    lo = _mm256_fmadd_ps(ai, b0, lo);
    if constexpr (C == 16) hi = _mm256_fmadd_ps(ai, b1, hi);
  };
  for (int64_t j = 0; j < kc; ++j) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = C == 16 ? _mm256_loadu_ps(b + 8) : b0;
    fma_row(x0 + j, b0, b1, c00, c01);
    if constexpr (R > 1) fma_row(x1 + j, b0, b1, c10, c11);
    if constexpr (R > 2) fma_row(x2 + j, b0, b1, c20, c21);
    if constexpr (R > 3) fma_row(x3 + j, b0, b1, c30, c31);
    if constexpr (R > 4) fma_row(x4 + j, b0, b1, c40, c41);
    if constexpr (R > 5) fma_row(x5 + j, b0, b1, c50, c51);
    b += C;
  }
  const __m256 acc[kPanelRows][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (int i = 0; i < R; ++i) {
    out.put(c + i * ldc, 0, acc[i][0]);
    if constexpr (C == 16) out.put(c + i * ldc + 8, 8, acc[i][1]);
  }
}

using RowsKernel = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, const LayerStore&);
// kernel_rows for 1 to 6 rows (by rows - 1), C columns.
template <int C>
constexpr RowsKernel kRowsKernels[kPanelRows] = {kernel_rows<1, C>, kernel_rows<2, C>, kernel_rows<3, C>,
                                                 kernel_rows<4, C>, kernel_rows<5, C>, kernel_rows<6, C>};
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

int64_t weight_panel_cols(int64_t n) { return n <= kColumnAlign ? kColumnAlign : kPanelCols; }

int64_t weight_panels(int64_t n) { return (n + weight_panel_cols(n) - 1) / weight_panel_cols(n); }

int64_t packed_weight_floats(int64_t n, int64_t k) { return weight_panels(n) * weight_panel_cols(n) * k; }

void pack_weight_columns(const float* w, int64_t ldw, int64_t n, int64_t k, float* packed) {
  pack_panels(w, ldw, n, k, weight_panel_cols(n), packed);
}

void packed_linear(const float* x, int64_t ldx, int64_t rows, int64_t k, const float* packed_w, int64_t n,
                   const float* bias, bool relu, float* y, int64_t ldy, int64_t panel_begin, int64_t panel_end) {
  TORCH_CHECK(packed_gemm_available(), "packed_linear: this CPU has no AVX2 + FMA");
  TORCH_CHECK(k > 0 && n > 0 && 0 <= panel_begin && panel_begin <= panel_end && panel_end <= weight_panels(n),
              "packed_linear: bad shape or panel range");
#if defined(__x86_64__)
  if (rows <= 0) return;
  const int64_t row_panels = (rows + kPanelRows - 1) / kPanelRows;
  const int64_t width = weight_panel_cols(n);
  const RowsKernel* kernels = width == kPanelCols ? kRowsKernels<kPanelCols> : kRowsKernels<kColumnAlign>;
  // Per k chunk, every panel of W is read once from memory and x's chunk
  // (rows x 256 floats) from the caches by every panel.
  for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
    const int64_t kc = std::min(kChunk, k - k0);
    const bool last = k0 + kc == k;
    for (int64_t q = panel_begin; q < panel_end; ++q) {
      const int64_t col = q * width;
      LayerStore store{std::min(width, n - col)};
      store.add = k0 > 0;
      store.bias = last && bias ? bias + col : nullptr;
      store.relu = last && relu;
      const float* sliver = packed_w + (q * k + k0) * width;
      for (int64_t p = 0; p < row_panels; ++p) {
        const int64_t r = std::min(kPanelRows, rows - p * kPanelRows);
        kernels[r - 1](kc, x + p * kPanelRows * ldx + k0, ldx, sliver, y + p * kPanelRows * ldy + col, ldy, store);
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
