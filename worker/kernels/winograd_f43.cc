// Winograd F(4x4, 3x3) on NCHW (winograd_f43.h), with Lavin and Gray's
// matrices (interpolation points 0, +-1, +-2 and infinity):
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
// Tiles are numbered row by row (item, tile row, tile column) with no gaps,
// and the transforms work on eight consecutive tiles of one channel at once,
// in registers: each reads its input once and writes its result once (the
// 6x6 intermediate stays in registers and L1). For that, the six input rows
// of a tile row are first split by column position in the tile (x mod 4,
// "phases"), so that a patch column of eight tiles is one vector: patch
// column j of tile t is phase j of t for j < 4, phase j - 4 of t + 1 after.
#include "worker/kernels/winograd_f43.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <oneapi/dnnl/dnnl.h>
#include <torch/library.h>

#include "worker/kernels/onednn_context.h"
#include "worker/kernels/packed_gemm.h"
#include "worker/kernels/winograd_f43_math.h"

namespace corepool {
namespace {

using namespace winograd_f43_math;  // NOLINT: the transforms' vocabulary (Vec, load, store, bt6, at6)

constexpr int64_t kTaps = 36;  // 6x6 transformed points per tile
constexpr int64_t kLanes = 8;  // tiles per vector in the transforms
// Scratch of one block of tile rows: its transformed input and its products.
// Every block reads all of U (36 MB for a 512 -> 512 layer), so blocks must
// not be small; measured on CNN10's layers (AMD EPYC Zen 3,
// `corepool-winograd-bench --batch 2 --reps 10 --block-kb N`, the packed
// column): 1 MB blocks took 48 ms in all, 4 and 16 MB 35.5-35.8.
constexpr int64_t kBlockBytes = int64_t{4} << 20;

// The geometry of one call. Tiles are numbered row by row over the whole
// batch: tile row r is item r / tile_rows, tile row r % tile_rows.
struct Geometry {
  int64_t channels, outputs, height, width;
  int64_t tile_rows, tile_cols;  // per item
  // Vector groups per tile row, and the phase arrays' length: one more tile
  // (a tile's patch columns 4 and 5 are the next tile's phases 0 and 1) and
  // room for the last group's full-width loads.
  int64_t groups() const { return (tile_cols + kLanes - 1) / kLanes; }
  int64_t phase_len() const { return groups() * kLanes + 1; }
};

// One block: tile rows [first, first + rows), their tiles numbered from 0;
// `stride` (>= rows * tile_cols, a multiple of the GEMM's column panel) is
// the row length of every [tap][channel][tile] array.
struct Block {
  int64_t first, rows, stride;
};

// Per-thread scratch, from malloc: never the c10 allocator, which inside the
// optimizer's arena scope would put it in the sealed arena. Kept between
// calls, so that its pages are faulted in once. One for a block's transformed
// input and products, one for the few rows a transform works on.
std::vector<float>& thread_scratch(size_t floats) {
  thread_local std::vector<float> s;
  if (s.size() < floats) s.resize(floats);
  return s;
}

std::vector<float>& thread_rows(size_t floats) {
  thread_local std::vector<float> s;
  if (s.size() < floats) s.resize(floats);
  return s;
}

// The six input rows of tile row ty (rows 4 ty - 1 .. 4 ty + 4) of one
// channel plane, zero-padded and split by column phase:
// phases[(k * 4 + p) * len + tx] = plane[4 ty - 1 + k][4 tx + p - 1].
void split_rows(const Geometry& g, const float* plane, int64_t ty, float* phases, float* padded) {
  const int64_t len = g.phase_len();
  for (int64_t k = 0; k < 6; ++k) {
    const int64_t y = 4 * ty - 1 + k;
    if (y < 0 || y >= g.height) {  // padding rows
      std::fill(phases + k * 4 * len, phases + (k + 1) * 4 * len, 0.0f);
      continue;
    }
    // padded[x + 1] = row[x]: the left padding column first; zeros after.
    std::copy(plane + y * g.width, plane + (y + 1) * g.width, padded + 1);
    deinterleave4(padded, len, phases + k * 4 * len, len);
  }
}

// V = B^T d B of eight tiles (tx0 .. tx0 + 7 of the split rows), tap p to
// v[p * tap_stride] (eight consecutive tiles). Inlined into the two ISA
// versions below (Transforms).
__attribute__((always_inline)) inline void input_tiles(const float* phases, int64_t len, int64_t tx0, float* v,
                                                       int64_t tap_stride) {
  Vec rows[6][6];  // B^T applied along each row: rows[k][j]
  for (int k = 0; k < 6; ++k) {
    const float* r = phases + k * 4 * len + tx0;
    const Vec d[6] = {load(r), load(r + len), load(r + 2 * len), load(r + 3 * len), load(r + 1), load(r + len + 1)};
    bt6(d, rows[k]);
  }
  for (int j = 0; j < 6; ++j) {
    const Vec d[6] = {rows[0][j], rows[1][j], rows[2][j], rows[3][j], rows[4][j], rows[5][j]};
    Vec o[6];
    bt6(d, o);
    for (int i = 0; i < 6; ++i) store(v + (i * 6 + j) * tap_stride, o[i]);
  }
}

// The transforms' two ISA versions, each with the generic vectors inlined
// and lowered for its ISA: AVX2 (one register per Vec) where the CPU has it,
// else the portable one (two SSE registers, every x86-64). Picked per layer
// (WinogradF43::Options::portable), so that an AVX2 machine runs both.
using InputTiles = void (*)(const float*, int64_t, int64_t, float*, int64_t);
__attribute__((target("avx2"))) void input_tiles_avx2(const float* phases, int64_t len, int64_t tx0, float* v,
                                                      int64_t tap_stride) {
  input_tiles(phases, len, tx0, v, tap_stride);
}
void input_tiles_portable(const float* phases, int64_t len, int64_t tx0, float* v, int64_t tap_stride) {
  input_tiles(phases, len, tx0, v, tap_stride);
}

// The transformed input of a block: v[(p * C + c) * stride + t].
void transform_input(const Geometry& g, const Block& b, const float* input, InputTiles input_tiles, float* v) {
  const int64_t len = g.phase_len();
  std::vector<float>& local = thread_rows(24 * len + 4 * len);  // phases, one padded row
  float* phases = local.data();
  float* padded = phases + 24 * len;
  std::fill(padded, padded + 4 * len, 0.0f);
  const int64_t tap_stride = g.channels * b.stride;
  float spill[kTaps * kLanes];  // the last group's lanes past the block's tiles
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t row = 0; row < b.rows; ++row) {
      const int64_t item = (b.first + row) / g.tile_rows, ty = (b.first + row) % g.tile_rows;
      split_rows(g, input + (item * g.channels + c) * g.height * g.width, ty, phases, padded);
      for (int64_t grp = 0; grp < g.groups(); ++grp) {
        // Lanes past this row's tiles land on the next row's, written after
        // (rows run in order); only past the block's last tile they would
        // reach the next channel, so that group goes through `spill`.
        const int64_t t = row * g.tile_cols + grp * kLanes;
        float* dst = v + c * b.stride + t;
        if (t + kLanes <= b.stride) {
          input_tiles(phases, len, grp * kLanes, dst, tap_stride);
          continue;
        }
        input_tiles(phases, len, grp * kLanes, spill, kLanes);
        for (int64_t p = 0; p < kTaps; ++p) {
          std::copy(spill + p * kLanes, spill + p * kLanes + (b.stride - t), dst + p * tap_stride);
        }
      }
    }
    // The padding tiles: zeros in, so their (unread) products are finite.
    for (int64_t p = 0; p < kTaps; ++p) {
      float* row = v + p * tap_stride + c * b.stride;
      std::fill(row + b.rows * g.tile_cols, row + b.stride, 0.0f);
    }
  }
}

// out[4 t + q] = y[q][t] for eight tiles t: four column vectors interleaved
// into 32 consecutive output columns, in registers. (Storing the vectors and
// reading them back in pieces stalls store-to-load forwarding.)
inline void interleave4x8(const Vec y[4], Vec out[4]) {
  typedef int Mask __attribute__((vector_size(32)));
  const Mask lo = {0, 8, 1, 9, 2, 10, 3, 11}, hi = {4, 12, 5, 13, 6, 14, 7, 15};
  const Mask first = {0, 1, 8, 9, 2, 3, 10, 11}, second = {4, 5, 12, 13, 6, 7, 14, 15};
  const Vec lo01 = __builtin_shuffle(y[0], y[1], lo), lo23 = __builtin_shuffle(y[2], y[3], lo);
  const Vec hi01 = __builtin_shuffle(y[0], y[1], hi), hi23 = __builtin_shuffle(y[2], y[3], hi);
  out[0] = __builtin_shuffle(lo01, lo23, first);   // tiles 0, 1
  out[1] = __builtin_shuffle(lo01, lo23, second);  // tiles 2, 3
  out[2] = __builtin_shuffle(hi01, hi23, first);   // tiles 4, 5
  out[3] = __builtin_shuffle(hi01, hi23, second);  // tiles 6, 7
}

// out[2 t + q] = y[q][t] for eight tiles t: two column vectors (a pooled
// tile row) interleaved into 16 consecutive output columns.
inline void interleave2x8(const Vec y[2], Vec out[2]) {
  typedef int Mask __attribute__((vector_size(32)));
  const Mask lo = {0, 8, 1, 9, 2, 10, 3, 11}, hi = {4, 12, 5, 13, 6, 14, 7, 15};
  out[0] = __builtin_shuffle(y[0], y[1], lo);
  out[1] = __builtin_shuffle(y[0], y[1], hi);
}

// What follows the products in one layer.
struct Epilogue {
  bool relu, pool;
};

// y = A^T m A + bias of eight tiles of one output channel, ReLU'd and pooled
// if the epilogue says so. Output row r (of the tile's 4, or 2 pooled) goes to
// dst[r] for r < rows: 32 columns (16 pooled), 4 (2) per tile.
__attribute__((always_inline)) inline void output_tiles(const float* m, int64_t tap_stride, float bias, Epilogue e,
                                                        float* const dst[4], int64_t rows) {
  Vec cols[6][4];  // A^T applied along each row of products: cols[i][q]
  for (int i = 0; i < 6; ++i) {
    Vec r[6];
    for (int j = 0; j < 6; ++j) r[j] = load(m + (i * 6 + j) * tap_stride);
    at6(r, cols[i]);
  }
  Vec y[4][4];  // y[r][q]: output row r, column q of each tile
  const Vec zero = {};
  for (int q = 0; q < 4; ++q) {
    const Vec d[6] = {cols[0][q], cols[1][q], cols[2][q], cols[3][q], cols[4][q], cols[5][q]};
    Vec o[4];
    at6(d, o);
    for (int r = 0; r < 4; ++r) {
      y[r][q] = o[r] + bias;
      if (e.relu) y[r][q] = y[r][q] > zero ? y[r][q] : zero;
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (e.pool) {
      const Vec pooled[2] = {0.25f * (y[2 * r][0] + y[2 * r][1] + y[2 * r + 1][0] + y[2 * r + 1][1]),
                             0.25f * (y[2 * r][2] + y[2 * r][3] + y[2 * r + 1][2] + y[2 * r + 1][3])};
      Vec out[2];
      interleave2x8(pooled, out);
      for (int k = 0; k < 2; ++k) store(dst[r] + k * kLanes, out[k]);
    } else {
      Vec out[4];
      interleave4x8(y[r], out);
      for (int k = 0; k < 4; ++k) store(dst[r] + k * kLanes, out[k]);
    }
  }
}

using OutputTiles = void (*)(const float*, int64_t, float, Epilogue, float* const[4], int64_t);
__attribute__((target("avx2"))) void output_tiles_avx2(const float* m, int64_t tap_stride, float bias, Epilogue e,
                                                       float* const dst[4], int64_t rows) {
  output_tiles(m, tap_stride, bias, e, dst, rows);
}
void output_tiles_portable(const float* m, int64_t tap_stride, float bias, Epilogue e, float* const dst[4],
                           int64_t rows) {
  output_tiles(m, tap_stride, bias, e, dst, rows);
}

// y = A^T m A + bias (ReLU, pool if fused) for every tile and output channel
// of the block, from the products m[(p * O + o) * stride + t], into the
// output ([N, O, H, W], or [N, O, H / 2, W / 2] pooled).
void transform_output(const Geometry& g, const Block& b, const float* m, const float* bias, Epilogue e,
                      OutputTiles output_tiles, float* output) {
  const int64_t tap_stride = g.outputs * b.stride;
  const int64_t scale = e.pool ? 2 : 1;  // output pixels per tile side: 4 / scale
  const int64_t height = g.height / scale, width = g.width / scale, side = 4 / scale;
  const int64_t group_columns = side * kLanes;
  float spill[kTaps * kLanes];          // the last group's products, padded to a full vector
  float edge[4][4 * kLanes];            // a group's rows where they pass the map's right edge
  for (int64_t o = 0; o < g.outputs; ++o) {
    for (int64_t row = 0; row < b.rows; ++row) {
      const int64_t item = (b.first + row) / g.tile_rows, ty = (b.first + row) % g.tile_rows;
      float* plane = output + (item * g.outputs + o) * height * width;
      const int64_t rows = std::min(side, height - side * ty);
      if (rows <= 0) continue;  // a pooled map drops an odd last row
      for (int64_t grp = 0; grp < g.groups(); ++grp) {
        const int64_t x0 = grp * group_columns, columns = std::min(group_columns, width - x0);
        if (columns <= 0) break;  // ... and an odd last column
        const int64_t t = row * g.tile_cols + grp * kLanes;
        const float* src = m + o * b.stride + t;
        int64_t step = tap_stride;
        if (t + kLanes > b.stride) {  // a full vector would cross into the next channel's products
          std::fill(spill, spill + kTaps * kLanes, 0.0f);
          for (int64_t p = 0; p < kTaps; ++p) {
            std::copy(src + p * tap_stride, src + p * tap_stride + (b.stride - t), spill + p * kLanes);
          }
          src = spill;
          step = kLanes;
        }
        float* dst[4];
        for (int64_t r = 0; r < 4; ++r) {
          dst[r] = columns == group_columns ? plane + (side * ty + std::min(r, rows - 1)) * width + x0 : edge[r];
        }
        output_tiles(src, step, bias[o], e, dst, rows);
        if (columns < group_columns) {
          for (int64_t r = 0; r < rows; ++r) std::copy(edge[r], edge[r] + columns, plane + (side * ty + r) * width + x0);
        }
      }
    }
  }
}

}  // namespace

WinogradF43::WinogradF43(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, bool relu, Options options)
    : in_(weight.dim() == 4 ? weight.size(1) : 0),
      out_(weight.dim() == 4 ? weight.size(0) : 0),
      relu_(relu),
      packed_(options.packed && !options.portable && packed_gemm_available()),
      avx2_(!options.portable && __builtin_cpu_supports("avx2")),
      pool_(options.avg_pool),
      block_bytes_(options.block_bytes > 0 ? options.block_bytes : kBlockBytes) {
  TORCH_CHECK(weight.dim() == 4 && weight.size(2) == 3 && weight.size(3) == 3 && weight.scalar_type() == at::kFloat,
              "WinogradF43: weights must be fp32 [O, C, 3, 3], got ", weight.sizes(), " ", weight.scalar_type());
  TORCH_CHECK(!bias || (bias->dim() == 1 && bias->size(0) == out_ && bias->scalar_type() == at::kFloat),
              "WinogradF43: bias must be fp32 [", out_, "]");
  const at::Tensor g = weight.contiguous();
  // The plain transform [36][O][C] in malloc'ed memory: only what the object
  // keeps comes from the c10 allocator (the optimizer's arena, if any).
  std::vector<float> plain(kTaps * out_ * in_);
  for (int64_t o = 0; o < out_; ++o) {
    for (int64_t c = 0; c < in_; ++c) {
      transform_weights(g.data_ptr<float>() + (o * in_ + c) * 9, plain.data() + o * in_ + c, out_ * in_);
    }
  }
  if (packed_) {
    const int64_t tap = packed_floats(out_, in_);
    u_ = at::empty({kTaps * tap}, weight.options());
    for (int64_t p = 0; p < kTaps; ++p) {
      pack_rows(plain.data() + p * out_ * in_, in_, out_, in_, u_.data_ptr<float>() + p * tap);
    }
  } else {
    u_ = at::empty({kTaps, out_, in_}, weight.options());
    std::copy(plain.begin(), plain.end(), u_.data_ptr<float>());
  }
  bias_ = bias ? bias->contiguous().clone() : at::zeros({out_}, weight.options());
}

at::Tensor WinogradF43::run(const at::Tensor& x) const {
  TORCH_CHECK(x.dim() == 4 && x.size(1) == in_ && x.scalar_type() == at::kFloat,
              "WinogradF43: input must be fp32 [N, ", in_, ", H, W], got ", x.sizes(), " ", x.scalar_type());
  apply_libtorch_threads();
  const at::Tensor input = x.contiguous();
  const Geometry g{in_, out_, input.size(2), input.size(3), (input.size(2) + 3) / 4, (input.size(3) + 3) / 4};
  const int64_t scale = pool_ ? 2 : 1;
  // As LibTorch's avg_pool2d, which this replaces: no pooled map of size 0.
  TORCH_CHECK(!pool_ || (g.height >= 2 && g.width >= 2), "WinogradF43: a ", g.height, "x", g.width,
              " map is too small for its fused 2x2 average pool");
  at::Tensor out = at::empty({input.size(0), out_, g.height / scale, g.width / scale}, input.options());
  if (out.numel() == 0) return out;
  const int64_t rows = input.size(0) * g.tile_rows;
  const int64_t per_tile = kTaps * (in_ + out_);  // floats of V and M per tile
  const int64_t rows_per_block = std::clamp<int64_t>(block_bytes_ / (per_tile * g.tile_cols * 4), 1, rows);
  // The packed kernel takes whole groups of kColumnAlign tiles: a block's row
  // stride is rounded up (the extra tiles are zeros in, never read out).
  const int64_t align = packed_ ? kColumnAlign : 1;
  const auto stride_of = [&](int64_t n) { return (n * g.tile_cols + align - 1) / align * align; };
  float* v = thread_scratch(per_tile * stride_of(rows_per_block)).data();  // [36][C][stride]
  const float* u = u_.data_ptr<float>();
  for (int64_t first = 0; first < rows; first += rows_per_block) {
    const int64_t n = std::min(rows_per_block, rows - first);
    const Block b{first, n, stride_of(n)};
    float* m = v + kTaps * in_ * b.stride;  // [36][O][stride]
    transform_input(g, b, input.data_ptr<float>(), avx2_ ? input_tiles_avx2 : input_tiles_portable, v);
    for (int64_t p = 0; p < kTaps; ++p) multiply_tap(p, u, v + p * in_ * b.stride, b.stride, m + p * out_ * b.stride);
    transform_output(g, b, m, bias_.data_ptr<float>(), Epilogue{relu_, pool_},
                     avx2_ ? output_tiles_avx2 : output_tiles_portable, out.data_ptr<float>());
  }
  return out;
}

// M[p] = U[p] V[p] for one tap: [O x C] x [C x tiles] -> [O x tiles].
void WinogradF43::multiply_tap(int64_t p, const float* u, const float* v, int64_t tiles, float* m) const {
  if (packed_) {
    packed_gemm(u + p * packed_floats(out_, in_), out_, in_, v, tiles, tiles, m, tiles);
    return;
  }
  const dnnl_status_t status =
      dnnl_sgemm('N', 'N', out_, tiles, in_, 1.0f, u + p * out_ * in_, in_, v, tiles, 0.0f, m, tiles);
  TORCH_CHECK(status == dnnl_success, "WinogradF43: oneDNN's sgemm failed (status ", static_cast<int>(status), ")");
}

namespace {

at::Tensor winograd_f43_op(const at::Tensor& x, const c10::intrusive_ptr<WinogradF43>& conv) { return conv->run(x); }

}  // namespace

TORCH_LIBRARY_FRAGMENT(corepool, m) {
  m.class_<WinogradF43>("WinogradF43");
  m.def("winograd_f43(Tensor x, __torch__.torch.classes.corepool.WinogradF43 conv) -> Tensor", winograd_f43_op);
}

}  // namespace corepool
