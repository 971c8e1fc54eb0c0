// A 3x3 convolution (stride 1, padding 1, no dilation, one group) as Winograd
// F(4x4, 3x3) on plain NCHW tensors, written here, for CPUs whose oneDNN has
// no Winograd kernel (oneDNN 2.6 has one for AVX-512 only: winograd_conv.h).
// On an AVX2 core oneDNN's direct convolutions already run CNN10 near the
// FMA peak, so the only way further is fewer multiplications: F(4x4, 3x3)
// does a quarter of them (36 products per 4x4 output tile instead of 144).
//
// One call, per block of tiles:
//   1. input transform  V[p][c][t] = (B^T d B)[p]  for the 6x6 input patch d of tile t, channel c;
//   2. 36 matrix products  M[p] = U[p] V[p]  ([O x C] x [C x tiles]): corepool's
//      kernel on U packed once (packed_gemm.h) where the CPU has AVX2 + FMA,
//      else oneDNN's sgemm;
//   3. output transform  y = A^T m A  per tile and output channel, + bias, ReLU and
//      a 2x2 average pool if fused (LibTorch's pools read the whole map again,
//      at a small fraction of the memory bandwidth).
// U = G g G^T (the weights, [36][O][C]) is made once, when the graph pass makes
// the layer: inside the optimizer's WeightArena scope, so one physical copy
// for every worker. The transforms work on eight tiles at a time in vector
// registers (an AVX2 version is picked at run time where the CPU has it and
// the layer is not made portable), so
// that each reads its input once and writes its result once.
// Thread-safe: run() only reads the object; its scratch is per thread.
#pragma once

#include <cstdint>

#include <torch/custom_class.h>
#include <torch/script.h>

namespace corepool {

class WinogradF43 : public torch::CustomClassHolder {
 public:
  // Convolutions with fewer input channels are left to LibTorch: the
  // transforms would cost more than the products they save.
  static constexpr int64_t kMinInChannels = 16;

  // How the products run. The defaults are the fastest; the others exist for
  // tests and corepool-winograd-bench.
  struct Options {
    bool packed = true;        // corepool's packed kernel where the CPU has it (else oneDNN's sgemm)
    int64_t block_bytes = 0;   // scratch per block of tile rows; 0 = the default
    // A 2x2 average pool (stride 2, no padding, floor) after bias and ReLU,
    // fused into the output transform: the layer returns [N, O, H/2, W/2].
    bool avg_pool = false;
    // The portable path (engine.kernels = "portable"): the transforms' non-AVX2
    // versions and oneDNN's sgemm whatever the CPU has, as a CPU without AVX2
    // runs them; `packed` is then ignored.
    bool portable = false;
  };

  // weight: [O, C, 3, 3] fp32; bias: [O] or none. Throws c10::Error otherwise.
  WinogradF43(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, bool relu, Options options);
  WinogradF43(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, bool relu)
      : WinogradF43(weight, bias, relu, Options{}) {}

  // x: fp32 [N, C, H, W] -> [N, O, H, W] (pooled: [N, O, H / 2, W / 2]).
  at::Tensor run(const at::Tensor& x) const;

  int64_t in_channels() const { return in_; }
  int64_t out_channels() const { return out_; }
  bool relu() const { return relu_; }
  bool packed() const { return packed_; }
  bool avg_pool() const { return pool_; }
  // The transforms run their AVX2 version (else the portable one).
  bool avx2() const { return avx2_; }

 private:
  void multiply_tap(int64_t p, const float* u, const float* v, int64_t tiles, float* m) const;

  int64_t in_;
  int64_t out_;
  bool relu_;
  bool packed_;
  bool avx2_;
  bool pool_;
  int64_t block_bytes_;
  at::Tensor u_;     // each tap's weights, transformed: [36, O, C], or per tap pack_rows() panels when packed_
  at::Tensor bias_;  // [O] (zeros without a bias)
};

}  // namespace corepool
