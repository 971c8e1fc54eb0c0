// C = A B (fp32) with A packed once, ahead of time, and B, C plain row-major:
// the matrix products of Winograd's middle step (winograd_f43.h), where A is
// a layer's transformed weights (fixed when the model is optimized) and B the
// transformed input of a block of tiles (new every call).
//
// Why not oneDNN's sgemm: it packs A again on every call. For Winograd's
// products A is large (36 MB per call for a 512 -> 512 layer) and B narrow (a
// few dozen tiles on CNN10's last layers), so that repacking costs as much as
// the multiplications. Packing A once, inside the optimizer's weight arena,
// also makes the packed copy the one shared by every worker.
//
// The kernel is the usual register-blocked one (as in BLIS, GotoBLAS): a 6x16
// block of C lives in 12 AVX2 registers while k runs; B's 16 columns are read
// as two vectors per k, A's 6 rows broadcast one value each. k is cut in
// chunks of 256 so that a 256x16 sliver of B (16 KB) stays in L1 while every
// 6-row panel of A passes over it.
#pragma once

#include <cstdint>

namespace corepool {

constexpr int64_t kPanelRows = 6;   // rows of A per packed panel (and of C per kernel call)
constexpr int64_t kPanelCols = 16;  // columns of B and C per kernel call
constexpr int64_t kColumnAlign = 8; // n must be a multiple of this (the last call may take 8 columns)

// True where the CPU runs the AVX2 + FMA kernel; elsewhere callers use
// another GEMM (packed_gemm() must not be called).
bool packed_gemm_available();

// Floats that pack_rows() writes for an m x k matrix: m rounded up to whole
// panels (the padding rows are zeros), times k.
int64_t packed_floats(int64_t m, int64_t k);

// Packs row-major A (m x k, row stride lda) into panels of kPanelRows rows:
// packed[(panel * k + j) * kPanelRows + i] = A[panel * kPanelRows + i][j].
void pack_rows(const float* a, int64_t lda, int64_t m, int64_t k, float* packed);

// C[m x n] = A[m x k] B[k x n], A from pack_rows(); B and C row-major with row
// strides ldb, ldc. n must be a multiple of kColumnAlign (callers pad B's
// columns; the padding columns of C are written too).
void packed_gemm(const float* packed_a, int64_t m, int64_t k, const float* b, int64_t ldb, int64_t n, float* c,
                 int64_t ldc);

// The same products for a linear layer, y = x W^T + b: W [n x k] (as a layer
// stores its weights) packed once by pack_weight_columns() into panels of
// kPanelCols output columns (8 for a layer of at most 8), x read where it is
// by kernels made for 1 to 6 rows. Each panel of W is read once per call
// whatever the row count, which is what bounds a serving engine's small
// batches: OpenBLAS's sgemm packs W again on every call, and oneDNN's AVX2
// gemm reads it once per few rows.

// Output columns per panel of a layer with n outputs: kPanelCols, or
// kColumnAlign (8) where n <= 8 (wider panels would be mostly padding).
int64_t weight_panel_cols(int64_t n);
// Panels of a layer with n outputs: n / weight_panel_cols(n), rounded up.
int64_t weight_panels(int64_t n);

// Floats that pack_weight_columns() writes for n outputs of k inputs: whole
// panels (padding columns are zeros), times k.
int64_t packed_weight_floats(int64_t n, int64_t k);

// Packs W (n x k, row stride ldw), with P = weight_panel_cols(n):
// packed[(panel * k + j) * P + i] = W[panel * P + i][j].
void pack_weight_columns(const float* w, int64_t ldw, int64_t n, int64_t k, float* packed);

// y[rows x n] (row stride ldy) = x[rows x k] (row stride ldx) W^T + bias
// (n values, or null), then max(0, .) if relu, for the output columns of
// panels [panel_begin, panel_end) of weight_panels(n) only: callers split the
// panels between threads. Columns past n are neither read nor written.
void packed_linear(const float* x, int64_t ldx, int64_t rows, int64_t k, const float* packed_w, int64_t n,
                   const float* bias, bool relu, float* y, int64_t ldy, int64_t panel_begin, int64_t panel_end);

}  // namespace corepool
