#include "worker/kernels/packed_linear.h"

#include <ATen/Parallel.h>
#include <torch/library.h>

#include "worker/kernels/linear_layer.h"
#include "worker/kernels/packed_gemm.h"

namespace corepool {
namespace {

// Output panels per intra-op task: about 1 MB of packed weights, so that a
// task is worth waking a thread for.
int64_t panels_per_task(int64_t in, int64_t out) {
  return std::max<int64_t>(1, (int64_t{1} << 18) / (in * weight_panel_cols(out)));
}

}  // namespace

PackedLinear::PackedLinear(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, bool relu)
    : bias_(checked_linear_bias("PackedLinear", weight, bias)),
      in_(weight.size(1)),
      out_(weight.size(0)),
      relu_(relu) {
  TORCH_CHECK(packed_gemm_available(), "PackedLinear: this CPU has no AVX2 + FMA");
  // at::empty: the c10 allocator, so inside the optimizer's arena scope the
  // packed weights are allocated in the arena.
  packed_ = at::empty({packed_weight_floats(out_, in_)}, at::kFloat);
  const at::Tensor plain = weight.contiguous();
  pack_weight_columns(plain.data_ptr<float>(), in_, out_, in_, packed_.data_ptr<float>());
}

at::Tensor PackedLinear::run(const at::Tensor& x) const {
  const auto [input, out_shape] = linear_input("PackedLinear", x, in_, out_);
  const int64_t rows = input.size(0);
  at::Tensor out = at::empty({rows, out_}, input.options());
  const float* bias = bias_.defined() ? bias_.data_ptr<float>() : nullptr;
  at::parallel_for(0, weight_panels(out_), panels_per_task(in_, out_), [&](int64_t begin, int64_t end) {
    packed_linear(input.data_ptr<float>(), in_, rows, in_, packed_.data_ptr<float>(), out_, bias, relu_,
                  out.data_ptr<float>(), out_, begin, end);
  });
  return out.view(out_shape);
}

namespace {

at::Tensor packed_linear_op(const at::Tensor& x, const c10::intrusive_ptr<PackedLinear>& layer) {
  return layer->run(x);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(corepool, m) {
  m.class_<PackedLinear>("PackedLinear");
  m.def("packed_linear(Tensor x, __torch__.torch.classes.corepool.PackedLinear layer) -> Tensor", packed_linear_op);
}

}  // namespace corepool
