// A linear layer (y = x W^T + b, optionally ReLU) run by corepool's own AVX2
// kernel (packed_gemm.h) on weights packed once into panels of 16 output
// columns (8 for a layer of at most 8 outputs). Where oneDNN has no brgemm
// kernel (CPUs without AVX-512) its inner product runs `x64:gemm:jit`, which
// reads the weights again for every few rows: on the memory benchmark's
// 307 MB layer it was slower than LibTorch's own addmm from 2 rows on. This kernel reads every weight once per call at any row
// count (corepool-linear-bench, bench/RESULTS.md). Made by the graph pass
// (linear_rewrite.h) inside the optimizer's WeightArena scope, so the packed
// weights are the one physical copy every worker maps.
// Thread-safe: engine threads share one object; run() keeps no state.
#pragma once

#include <torch/custom_class.h>
#include <torch/script.h>

namespace corepool {

class PackedLinear : public torch::CustomClassHolder {
 public:
  // weight: [out, in] fp32; bias: [out] or none. Throws c10::Error for other
  // shapes or types, or on a CPU without AVX2 + FMA (packed_gemm_available()).
  PackedLinear(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, bool relu);

  // x: fp32 [..., in] -> [..., out]. Output columns are split between
  // LibTorch's intra-op threads.
  at::Tensor run(const at::Tensor& x) const;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  bool relu() const { return relu_; }

 private:
  at::Tensor bias_;  // [out] fp32, or undefined. First: its initializer checks the weights
  int64_t in_, out_;
  bool relu_;
  at::Tensor packed_;  // the weights as pack_weight_columns() lays them out
};

}  // namespace corepool
