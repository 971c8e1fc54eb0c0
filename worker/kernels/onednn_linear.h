// A linear layer (y = x W^T + b, optionally ReLU) run by oneDNN's inner
// product on weights prepacked once into the layout its kernel reads. LibTorch
// 1.13 runs a frozen model's addmm through OpenBLAS's sgemm, which at the small
// batches of a serving engine spends most of its time packing the weight
// matrix on every call: on the 316 MB memory-bench model's 1.2M x 64 hidden
// layer, 110-115 ms per call at 1-4 rows against 35-39 ms here, which is
// about one read of the weights at that machine's memory bandwidth
// (corepool-linear-bench, bench/RESULTS.md). The prepacking runs when the graph pass
// (linear_rewrite.h) makes the layer, inside the optimizer's WeightArena scope:
// one physical copy for every worker.
// Thread-safe: engine threads share one object; its primitive cache is behind a mutex.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>
#include <torch/custom_class.h>
#include <torch/script.h>

namespace corepool {

class OnednnLinear : public torch::CustomClassHolder {
 public:
  // weight: [out, in] fp32; bias: [out] or none. Throws c10::Error for other
  // shapes or types, dnnl::error if this CPU's oneDNN has no kernel.
  OnednnLinear(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, bool relu);
  ~OnednnLinear() override;

  // x: fp32 [..., in] -> [..., out].
  at::Tensor run(const at::Tensor& x);

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  bool relu() const { return relu_; }
  // The name of the kernel oneDNN chose (e.g. "brgemm:avx512_core").
  const std::string& kernel() const { return kernel_; }
  // The kernel oneDNN would choose for such a layer, without packing its
  // weights. Throws dnnl::error if this CPU's oneDNN has none.
  static std::string kernel_for(int64_t out, int64_t in, bool relu);

 private:
  struct Primitive;  // one oneDNN primitive per row count
  const Primitive& primitive(int64_t rows);

  at::Tensor bias_;  // [out] fp32 (zeros without a bias). First: its initializer checks the weights
  int64_t in_, out_;
  bool relu_;
  at::Tensor packed_;  // uint8: the weights in weights_desc_'s layout
  dnnl::memory::desc weights_desc_;
  std::string kernel_;
  std::mutex mu_;
  std::map<int64_t, std::unique_ptr<Primitive>> primitives_;  // by row count
};

}  // namespace corepool
