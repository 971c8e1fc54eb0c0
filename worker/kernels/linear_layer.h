// What corepool's two linear layer classes (onednn_linear.h, packed_linear.h)
// check and prepare alike: fp32 weights [out, in] with an optional bias
// [out], and an fp32 input [..., in] seen as a dense matrix of rows.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/script.h>

namespace corepool {

// Throws c10::Error naming `who` unless weight is dense fp32 [out, in] with
// out, in > 0 and bias (if any) has out fp32 values. Returns the bias as a
// contiguous [out] tensor, or an undefined one without a bias.
inline at::Tensor checked_linear_bias(const char* who, const at::Tensor& weight,
                                      const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == at::kFloat && weight.size(0) > 0 && weight.size(1) > 0 &&
                  !weight.is_mkldnn(),
              who, ": weights must be fp32 [out, in], got ", weight.sizes(), " ", weight.scalar_type());
  if (!bias.has_value()) return {};
  const int64_t out = weight.size(0);
  TORCH_CHECK(bias->numel() == out && bias->scalar_type() == at::kFloat && !bias->is_mkldnn(), who,
              ": bias must be fp32 [", out, "], got ", bias->sizes(), " ", bias->scalar_type());
  return bias->reshape({out}).contiguous();
}

// x as a contiguous dense [rows, in] matrix, and the shape of the layer's
// output ([..., out]). Throws c10::Error naming `who` for another shape or type.
struct LinearInput {
  at::Tensor rows;
  std::vector<int64_t> out_shape;
};
inline LinearInput linear_input(const char* who, const at::Tensor& x, int64_t in, int64_t out) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == in && x.scalar_type() == at::kFloat, who, ": input must be fp32 [..., ",
              in, "], got ", x.sizes(), " ", x.scalar_type());
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape.back() = out;
  // A oneDNN-layout tensor from LibTorch's own passes comes back to dense first.
  return {(x.is_mkldnn() ? x.to_dense() : x).reshape({-1, in}).contiguous(), std::move(out_shape)};
}

}  // namespace corepool
