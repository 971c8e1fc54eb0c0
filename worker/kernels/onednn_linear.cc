// The weights' layout is chosen once, for one row: oneDNN's inner product
// picks the same layout and kernel for every row count (checked for 1 to 64
// rows and several shapes on AVX-512), and a primitive made for another count
// reads it as given.
#include "worker/kernels/onednn_linear.h"

#include <string>
#include <unordered_map>
#include <vector>

#include <torch/library.h>

#include "worker/kernels/linear_layer.h"
#include "worker/kernels/onednn_context.h"

namespace corepool {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using DataType = memory::data_type;

// The inner product of `rows` rows through [out, in] weights laid out as `weights`.
dnnl::inner_product_forward::primitive_desc desc(int64_t rows, int64_t in, int64_t out, bool relu,
                                                  const memory::desc& weights) {
  const memory::desc src({rows, in}, DataType::f32, Tag::nc);
  const memory::desc bias({out}, DataType::f32, Tag::x);
  const memory::desc dst({rows, out}, DataType::f32, Tag::nc);
  const dnnl::inner_product_forward::desc d(dnnl::prop_kind::forward_inference, src, weights, bias, dst);
  return dnnl::inner_product_forward::primitive_desc(d, inference_attr(relu), onednn_engine());
}

// The layout oneDNN picks for the weights (for one row: see above).
dnnl::inner_product_forward::primitive_desc chosen_desc(int64_t in, int64_t out, bool relu) {
  return desc(1, in, out, relu, memory::desc({out, in}, DataType::f32, Tag::any));
}

}  // namespace

struct OnednnLinear::Primitive {
  dnnl::inner_product_forward ip;
  memory::desc src_desc, dst_desc;
  size_t scratch_bytes = 0;
};

OnednnLinear::OnednnLinear(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, bool relu)
    : bias_(checked_linear_bias("OnednnLinear", weight, bias)),
      in_(weight.size(1)),
      out_(weight.size(0)),
      relu_(relu) {
  if (!bias_.defined()) bias_ = at::zeros({out_});
  const auto chosen = chosen_desc(in_, out_, relu_);
  weights_desc_ = chosen.weights_desc();
  kernel_ = chosen.impl_info_str();
  // at::empty: the c10 allocator, so inside the optimizer's arena scope the
  // packed weights are allocated in the arena.
  packed_ = at::empty({static_cast<int64_t>(weights_desc_.get_size())}, at::kByte);
  const at::Tensor plain_weight = weight.contiguous();
  memory plain({{out_, in_}, DataType::f32, Tag::oi}, onednn_engine(), plain_weight.data_ptr());
  memory target(weights_desc_, onednn_engine(), packed_.data_ptr());
  dnnl::reorder(plain, target).execute(onednn_thread_stream(), plain, target);
  onednn_thread_stream().wait();
}

OnednnLinear::~OnednnLinear() = default;

std::string OnednnLinear::kernel_for(int64_t out, int64_t in, bool relu) {
  return chosen_desc(in, out, relu).impl_info_str();
}

const OnednnLinear::Primitive& OnednnLinear::primitive(int64_t rows) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = primitives_.find(rows); it != primitives_.end()) return *it->second;
  const auto pd = desc(rows, in_, out_, relu_, weights_desc_);
  auto made = std::make_unique<Primitive>();
  made->src_desc = pd.src_desc();
  made->dst_desc = pd.dst_desc();
  made->scratch_bytes = pd.scratchpad_desc().get_size();
  made->ip = dnnl::inner_product_forward(pd);
  return *primitives_.emplace(rows, std::move(made)).first->second;
}

at::Tensor OnednnLinear::run(const at::Tensor& x) {
  const auto [input, out_shape] = linear_input("OnednnLinear", x, in_, out_);
  const int64_t rows = input.size(0);
  at::Tensor out = at::empty({rows, out_}, input.options());
  if (rows > 0) {
    apply_libtorch_threads();
    const Primitive& p = primitive(rows);
    memory src(p.src_desc, onednn_engine(), input.data_ptr());
    memory weights(weights_desc_, onednn_engine(), packed_.data_ptr());
    memory bias({{out_}, DataType::f32, Tag::x}, onednn_engine(), bias_.data_ptr());
    memory dst(p.dst_desc, onednn_engine(), out.data_ptr());
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}};
    if (p.scratch_bytes > 0) {
      args.emplace(DNNL_ARG_SCRATCHPAD, memory({{static_cast<int64_t>(p.scratch_bytes)}, DataType::u8, Tag::x},
                                               onednn_engine(), onednn_thread_scratch(p.scratch_bytes)));
    }
    p.ip.execute(onednn_thread_stream(), args);
    onednn_thread_stream().wait();
  }
  return out.view(out_shape);
}

namespace {

at::Tensor onednn_linear_op(const at::Tensor& x, const c10::intrusive_ptr<OnednnLinear>& layer) {
  return layer->run(x);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(corepool, m) {
  m.class_<OnednnLinear>("OnednnLinear");
  m.def("onednn_linear(Tensor x, __torch__.torch.classes.corepool.OnednnLinear layer) -> Tensor", onednn_linear_op);
}

}  // namespace corepool
