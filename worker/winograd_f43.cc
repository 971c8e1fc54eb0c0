// Winograd F(4x4, 3x3) on NCHW (winograd_f43.h), with Lavin and Gray's
// matrices (interpolation points 0, +-1, +-2 and infinity):
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
// Tiles are laid out row by row (item, tile row, tile column), and every
// transform runs over all channels and tiles of a block at once, one array
// per tap, so that its loops are long, unit-stride and vectorize (a loop per
// tile row would be 3 tiles long on an 8x12 map). The input's columns are
// first split by their position in the tile (x mod 4, "phases"): patch
// column j of tile t is phase j of t for j < 4, phase j - 4 of t + 1 after.
#include "worker/winograd_f43.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <oneapi/dnnl/dnnl.h>
#ifdef __SSE2__
#include <immintrin.h>
#endif
#include <torch/library.h>

#include "worker/onednn_context.h"

namespace corepool {
namespace {

constexpr int64_t kTaps = 36;  // 6x6 transformed points per tile
// Scratch of one block of tile rows (phases, transformed input, products).
// Each block reads all of U (36 MB for a 512 -> 512 layer), so fewer, larger
// blocks pay for the cache misses they cost: measured on CNN10 (AMD EPYC
// Zen 3, `corepool batch` on 120 s of noise, batch 2 and 4), 1 MB blocks
// took 12.7 s, 2-4 MB 6.6-8.9 s, 8 MB 5.7-6.5 s, 16 MB 7.3 s.
constexpr int64_t kBlockBytes = int64_t{8} << 20;

// out[j][x] = sum_k B^T[j][k] in[k][x], x < n.
__attribute__((target_clones("avx2", "default"))) void apply_bt(const float* const in[6], float* const out[6],
                                                                         int64_t n) {
  const float *a0 = in[0], *a1 = in[1], *a2 = in[2], *a3 = in[3], *a4 = in[4], *a5 = in[5];
  float *o0 = out[0], *o1 = out[1], *o2 = out[2], *o3 = out[3], *o4 = out[4], *o5 = out[5];
  // The arrays never overlap; without this, GCC would need more run-time
  // alias checks than it is willing to emit, and leave the loop scalar.
#pragma GCC ivdep
  for (int64_t x = 0; x < n; ++x) {
    o0[x] = 4 * a0[x] - 5 * a2[x] + a4[x];
    o1[x] = -4 * (a1[x] + a2[x]) + a3[x] + a4[x];
    o2[x] = 4 * (a1[x] - a2[x]) - a3[x] + a4[x];
    o3[x] = 2 * (a3[x] - a1[x]) - a2[x] + a4[x];
    o4[x] = 2 * (a1[x] - a3[x]) - a2[x] + a4[x];
    o5[x] = 4 * a1[x] - 5 * a3[x] + a5[x];
  }
}

// out[q][x] = sum_j A^T[q][j] in[j][x], x < n.
__attribute__((target_clones("avx2", "default"))) void apply_at(const float* const in[6], float* const out[4],
                                                                         int64_t n) {
  const float *a0 = in[0], *a1 = in[1], *a2 = in[2], *a3 = in[3], *a4 = in[4], *a5 = in[5];
  float *o0 = out[0], *o1 = out[1], *o2 = out[2], *o3 = out[3];
#pragma GCC ivdep
  for (int64_t x = 0; x < n; ++x) {
    const float s12 = a1[x] + a2[x], d12 = a1[x] - a2[x];
    const float s34 = a3[x] + a4[x], d34 = a3[x] - a4[x];
    o0[x] = a0[x] + s12 + s34;
    o1[x] = d12 + 2 * d34;
    o2[x] = s12 + 4 * s34;
    o3[x] = d12 + 8 * d34 + a5[x];
  }
}

// dst[p][t] = src[4 t + p] for p < 4, t < tiles (dst[p] = dst + p * stride):
// a row split into the four phases of its 4-wide tiles. 4x4 transposes of
// SSE registers where the ISA has them (every x86-64), else one by one.
void deinterleave4(const float* src, int64_t tiles, float* dst, int64_t stride) {
  int64_t t = 0;
#ifdef __SSE2__
  for (; t + 4 <= tiles; t += 4) {
    __m128 r0 = _mm_loadu_ps(src + 4 * t), r1 = _mm_loadu_ps(src + 4 * t + 4);
    __m128 r2 = _mm_loadu_ps(src + 4 * t + 8), r3 = _mm_loadu_ps(src + 4 * t + 12);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(dst + t, r0);
    _mm_storeu_ps(dst + stride + t, r1);
    _mm_storeu_ps(dst + 2 * stride + t, r2);
    _mm_storeu_ps(dst + 3 * stride + t, r3);
  }
#endif
  for (; t < tiles; ++t) {
    for (int64_t p = 0; p < 4; ++p) dst[p * stride + t] = src[4 * t + p];
  }
}

// The inverse: dst[4 t + p] = src[p][t] (src[p] = src + p * stride).
void interleave4(const float* src, int64_t stride, int64_t tiles, float* dst) {
  int64_t t = 0;
#ifdef __SSE2__
  for (; t + 4 <= tiles; t += 4) {
    __m128 r0 = _mm_loadu_ps(src + t), r1 = _mm_loadu_ps(src + stride + t);
    __m128 r2 = _mm_loadu_ps(src + 2 * stride + t), r3 = _mm_loadu_ps(src + 3 * stride + t);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(dst + 4 * t, r0);
    _mm_storeu_ps(dst + 4 * t + 4, r1);
    _mm_storeu_ps(dst + 4 * t + 8, r2);
    _mm_storeu_ps(dst + 4 * t + 12, r3);
  }
#endif
  for (; t < tiles; ++t) {
    for (int64_t p = 0; p < 4; ++p) dst[4 * t + p] = src[p * stride + t];
  }
}

// U = G g G^T of one 3x3 kernel g, in double; tap p goes to u[p * stride].
void transform_weights(const float* g, float* u, int64_t stride) {
  static constexpr double G[6][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                     {-1.0 / 6, 1.0 / 6, -1.0 / 6}, {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                     {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
  double gg[6][3];
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 3; ++j) {
      gg[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
    }
  }
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) {
      u[(i * 6 + j) * stride] = static_cast<float>(gg[i][0] * G[j][0] + gg[i][1] * G[j][1] + gg[i][2] * G[j][2]);
    }
  }
}

// The geometry of one call. Tile rows are padded by one tile: a tile's
// patch columns 4 and 5 are the next tile's phases 0 and 1, so each row keeps
// one more phase tile, and the padded tile's (meaningless) products are
// computed and never read. That keeps every transform one unit-stride loop
// over all channels and tiles of a block.
struct Geometry {
  int64_t channels, outputs, height, width;
  int64_t tile_rows, tile_cols;  // per item
  int64_t padded_cols() const { return tile_cols + 1; }
};

// One block: tile rows [first, first + rows) of the whole batch (row r is item
// r / tile_rows, tile row r % tile_rows), padded_cols tiles each.
struct Block {
  int64_t first, rows, tiles;  // tiles = rows * padded_cols
};

// Per-thread scratch, from malloc: never the c10 allocator, which inside the
// optimizer's arena scope would put it in the sealed arena. Kept between
// calls, so that its pages are faulted in once.
std::vector<float>& thread_scratch(size_t floats) {
  thread_local std::vector<float> s;
  if (s.size() < floats) s.resize(floats);
  return s;
}

// One row's worth of per-thread scratch (at least `floats`, exactly that many
// elements visible).
std::vector<float>& thread_row(size_t floats) {
  thread_local std::vector<float> row;
  row.resize(floats);
  return row;
}

// Floats of scratch per padded tile: the phase arrays (24 per input channel)
// and their vertical transform (24), reused by the output transform (40 per
// output channel); the transformed input (36 per channel) and products (36 per
// output channel).
int64_t scratch_per_tile(const Geometry& g) {
  return std::max(48 * g.channels, 40 * g.outputs) + 36 * (g.channels + g.outputs);
}

// The input's rows split by column phase, zero-padded: phases[(k * 4 + p) *
// len + c * tiles + row * padded_cols + tx] is row 4 ty - 1 + k, column
// 4 tx + p - 1 of channel c, for the block's tile row `row`.
void split_phases(const Geometry& g, const Block& b, const float* input, float* phases) {
  const int64_t len = g.channels * b.tiles;
  std::fill(phases, phases + 24 * len, 0.0f);
  // One input row with the left padding column in front: padded[x + 1] = src[x].
  std::vector<float>& padded = thread_row(4 * g.padded_cols());
  std::fill(padded.begin(), padded.end(), 0.0f);
  for (int64_t row = 0; row < b.rows; ++row) {
    const int64_t item = (b.first + row) / g.tile_rows, ty = (b.first + row) % g.tile_rows;
    for (int64_t c = 0; c < g.channels; ++c) {
      const float* plane = input + (item * g.channels + c) * g.height * g.width;
      for (int64_t k = 0; k < 6; ++k) {
        const int64_t y = 4 * ty - 1 + k;
        if (y < 0 || y >= g.height) continue;
        const float* src = plane + y * g.width;
        std::copy(src, src + g.width, padded.begin() + 1);
        deinterleave4(padded.data(), g.padded_cols(), phases + k * 4 * len + c * b.tiles + row * g.padded_cols(), len);
      }
    }
  }
}

// V = B^T d B for every tile and channel of the block: v[p * len + c * tiles + t].
void transform_input(const Geometry& g, const Block& b, const float* input, float* work, float* v) {
  const int64_t len = g.channels * b.tiles;
  float* phases = work;             // [6 rows][4 phases][len]
  float* vertical = work + 24 * len;  // [6 taps][4 phases][len]
  split_phases(g, b, input, phases);
  for (int64_t p = 0; p < 4; ++p) {
    const float* in[6];
    float* out[6];
    for (int k = 0; k < 6; ++k) {
      in[k] = phases + (k * 4 + p) * len;
      out[k] = vertical + (k * 4 + p) * len;
    }
    apply_bt(in, out, len);
  }
  for (int64_t i = 0; i < 6; ++i) {
    // Reading one past a phase array lands in the next one (or the tap after):
    // only the padded tiles see it.
    const float* r = vertical + i * 4 * len;
    const float* in[6] = {r, r + len, r + 2 * len, r + 3 * len, r + 1, r + len + 1};
    float* out[6];
    for (int j = 0; j < 6; ++j) out[j] = v + (i * 6 + j) * len;
    apply_bt(in, out, len);
  }
}

// y = A^T m A + bias (ReLU if fused) for every tile and output channel of the
// block, from the products m[p * len + o * tiles + t], into the output.
void transform_output(const Geometry& g, const Block& b, const float* m, const float* bias, bool relu, float* work,
                      float* output) {
  const int64_t len = g.outputs * b.tiles;
  float* horizontal = work;         // [6 rows][4 columns][len]
  float* tile = work + 24 * len;    // [4 rows][4 columns][len]
  for (int64_t i = 0; i < 6; ++i) {
    const float* in[6];
    for (int j = 0; j < 6; ++j) in[j] = m + (i * 6 + j) * len;
    float* out[4];
    for (int q = 0; q < 4; ++q) out[q] = horizontal + (i * 4 + q) * len;
    apply_at(in, out, len);
  }
  for (int64_t q = 0; q < 4; ++q) {
    const float* in[6];
    for (int i = 0; i < 6; ++i) in[i] = horizontal + (i * 4 + q) * len;
    float* out[4];
    for (int r = 0; r < 4; ++r) out[r] = tile + (r * 4 + q) * len;
    apply_at(in, out, len);
  }
  std::vector<float>& out_row = thread_row(4 * g.tile_cols);  // one output row, interleaved back
  for (int64_t row = 0; row < b.rows; ++row) {
    const int64_t item = (b.first + row) / g.tile_rows, ty = (b.first + row) % g.tile_rows;
    for (int64_t o = 0; o < g.outputs; ++o) {
      float* plane = output + (item * g.outputs + o) * g.height * g.width;
      const int64_t base = o * b.tiles + row * g.padded_cols();
      for (int64_t r = 0; r < 4 && 4 * ty + r < g.height; ++r) {
        float* dst = plane + (4 * ty + r) * g.width;
        interleave4(tile + r * 4 * len + base, len, g.tile_cols, out_row.data());
        for (int64_t x = 0; x < g.width; ++x) {
          const float value = out_row[x] + bias[o];
          dst[x] = relu ? std::max(value, 0.0f) : value;
        }
      }
    }
  }
}

}  // namespace

WinogradF43::WinogradF43(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, bool relu)
    : in_(weight.dim() == 4 ? weight.size(1) : 0), out_(weight.dim() == 4 ? weight.size(0) : 0), relu_(relu) {
  TORCH_CHECK(weight.dim() == 4 && weight.size(2) == 3 && weight.size(3) == 3 && weight.scalar_type() == at::kFloat,
              "WinogradF43: weights must be fp32 [O, C, 3, 3], got ", weight.sizes(), " ", weight.scalar_type());
  TORCH_CHECK(!bias || (bias->dim() == 1 && bias->size(0) == out_ && bias->scalar_type() == at::kFloat),
              "WinogradF43: bias must be fp32 [", out_, "]");
  const at::Tensor g = weight.contiguous();
  u_ = at::empty({kTaps, out_, in_}, weight.options());
  for (int64_t o = 0; o < out_; ++o) {
    for (int64_t c = 0; c < in_; ++c) {
      transform_weights(g.data_ptr<float>() + (o * in_ + c) * 9, u_.data_ptr<float>() + o * in_ + c, out_ * in_);
    }
  }
  bias_ = bias ? bias->contiguous().clone() : at::zeros({out_}, weight.options());
}

at::Tensor WinogradF43::run(const at::Tensor& x) const {
  TORCH_CHECK(x.dim() == 4 && x.size(1) == in_ && x.scalar_type() == at::kFloat,
              "WinogradF43: input must be fp32 [N, ", in_, ", H, W], got ", x.sizes(), " ", x.scalar_type());
  apply_libtorch_threads();
  const at::Tensor input = x.contiguous();
  const Geometry g{in_, out_, input.size(2), input.size(3), (input.size(2) + 3) / 4, (input.size(3) + 3) / 4};
  at::Tensor out = at::empty({input.size(0), out_, g.height, g.width}, input.options());
  if (out.numel() == 0) return out;
  const int64_t rows = input.size(0) * g.tile_rows;
  const int64_t row_floats = scratch_per_tile(g) * g.padded_cols();
  const int64_t rows_per_block = std::clamp<int64_t>(kBlockBytes / (row_floats * 4), 1, rows);
  float* scratch = thread_scratch(row_floats * rows_per_block + 1).data();
  const float* u = u_.data_ptr<float>();
  for (int64_t first = 0; first < rows; first += rows_per_block) {
    const int64_t n = std::min(rows_per_block, rows - first);
    const Block b{first, n, n * g.padded_cols()};
    float* work = scratch;                                                    // phases, then output transform
    float* v = work + std::max(48 * in_, 40 * out_) * b.tiles;               // [36][C][tiles]
    float* m = v + kTaps * in_ * b.tiles;                                     // [36][O][tiles]
    transform_input(g, b, input.data_ptr<float>(), work, v);
    for (int64_t p = 0; p < kTaps; ++p) {
      const dnnl_status_t status = dnnl_sgemm('N', 'N', out_, b.tiles, in_, 1.0f, u + p * out_ * in_, in_,
                                              v + p * in_ * b.tiles, b.tiles, 0.0f, m + p * out_ * b.tiles, b.tiles);
      TORCH_CHECK(status == dnnl_success, "WinogradF43: oneDNN's sgemm failed (status ", static_cast<int>(status), ")");
    }
    transform_output(g, b, m, bias_.data_ptr<float>(), relu_, work, out.data_ptr<float>());
  }
  return out;
}

namespace {

at::Tensor winograd_f43_op(const at::Tensor& x, const c10::intrusive_ptr<WinogradF43>& conv) { return conv->run(x); }

}  // namespace

TORCH_LIBRARY_FRAGMENT(corepool, m) {
  m.class_<WinogradF43>("WinogradF43");
  m.def("winograd_f43(Tensor x, __torch__.torch.classes.corepool.WinogradF43 conv) -> Tensor", winograd_f43_op);
}

}  // namespace corepool
