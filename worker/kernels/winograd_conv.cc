// oneDNN's Winograd convolution behind a TorchScript custom class, and the
// corepool::* operators the rewritten graph calls (winograd_rewrite.cc).
// Every oneDNN object here is made from the c10 CPU allocator's memory (at::empty),
// so whatever runs inside a WeightArena scope is allocated in the arena.
#include "worker/kernels/winograd_conv.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <torch/library.h>

#include <chrono>
#include <string>
#include <tuple>

#include "worker/kernels/onednn_context.h"

namespace corepool {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using DataType = memory::data_type;

// Inference-only primitive descriptor for `n` items of [c, h, w] into `o`
// channels, blocked output, weights in whatever layout the kernel picks
// (format_tag::any), scratchpad passed by the caller so that threads never
// share one. Winograd reads blocked input; a layer whose input channels do not
// fill a block (`plain_input`: the network's first) reads plain NCHW and runs
// oneDNN's direct kernel. Throws dnnl::error if this CPU has no such kernel.
dnnl::convolution_forward::primitive_desc conv_desc(int64_t n, int64_t c, int64_t o, int64_t h, int64_t w, bool relu,
                                                    bool plain_input) {
  const memory::desc src({n, c, h, w}, DataType::f32, plain_input ? Tag::nchw : Tag::nChw16c);
  const memory::desc weights({o, c, 3, 3}, DataType::f32, Tag::any);
  const memory::desc bias({o}, DataType::f32, Tag::x);
  const memory::desc dst({n, o, h, w}, DataType::f32, Tag::nChw16c);
  const dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_inference,
      plain_input ? dnnl::algorithm::convolution_direct : dnnl::algorithm::convolution_winograd, src, weights, bias,
      dst, {1, 1}, {1, 1}, {1, 1});
  return dnnl::convolution_forward::primitive_desc(desc, inference_attr(relu), onednn_engine());
}

}  // namespace

// The weights transformed for one spatial size: one tensor per distinct layout
// the chunk sizes 1..kMaxChunk ask for.
struct WinogradConv::Layouts {
  std::vector<memory::desc> descs;
  std::vector<at::Tensor> packed;  // uint8, descs[i].get_size() bytes each
};

struct WinogradConv::Primitive {
  dnnl::convolution_forward conv;
  void* weights = nullptr;  // packed weights of the layout this primitive reads
  memory::desc weights_desc, src_desc, dst_desc;
  size_t scratch_bytes = 0;
};

// Probed once per shape: whether conv_desc gives a kernel, and (plain input)
// a jitted one: oneDNN's reference kernel would be far slower than LibTorch's.
bool kernel_available(int64_t in_channels, int64_t out_channels, bool plain_input) {
  static std::mutex mu;
  static std::map<std::tuple<int64_t, int64_t, bool>, bool> known;
  std::lock_guard<std::mutex> lock(mu);
  auto [it, fresh] = known.emplace(std::make_tuple(in_channels, out_channels, plain_input), false);
  if (fresh) {
    try {
      const auto pd = conv_desc(1, in_channels, out_channels, 8, 8, false, plain_input);
      it->second = std::string(pd.impl_info_str()).rfind("ref", 0) != 0;
    } catch (const dnnl::error&) {
      it->second = false;  // no kernel for this ISA or shape
    }
  }
  return it->second;
}

bool winograd_available(int64_t in_channels, int64_t out_channels) {
  if (in_channels % kChannelBlock != 0 || out_channels % kChannelBlock != 0) return false;
  return kernel_available(in_channels, out_channels, false);
}

bool plain_input_available(int64_t in_channels, int64_t out_channels) {
  if (in_channels % kChannelBlock == 0 || out_channels % kChannelBlock != 0) return false;
  return kernel_available(in_channels, out_channels, true);
}

WinogradConv::WinogradConv(at::Tensor weight, c10::optional<at::Tensor> bias, bool relu, bool plain_input)
    : weight_(weight.to(at::kFloat).contiguous()), relu_(relu), plain_input_(plain_input) {
  TORCH_CHECK(weight_.dim() == 4 && weight_.size(2) == 3 && weight_.size(3) == 3,
              "WinogradConv: weights must be [O, C, 3, 3], got ", weight_.sizes());
  bias_ = bias.has_value() ? bias->to(at::kFloat).contiguous() : at::zeros({weight_.size(0)});
}

WinogradConv::~WinogradConv() = default;

const WinogradConv::Primitive& WinogradConv::primitive(int64_t chunk, int64_t height, int64_t width) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<int64_t> key{chunk, height, width};
  if (auto it = primitives_.find(key); it != primitives_.end()) return *it->second;
  std::unique_ptr<Layouts>& layouts = layouts_[{height, width}];
  // The weights in oneDNN's layout `desc`, unless they are there already.
  const auto transform = [this](Layouts& into, const memory::desc& desc) {
    if (std::find(into.descs.begin(), into.descs.end(), desc) != into.descs.end()) return;
    memory plain({{out_channels(), in_channels(), 3, 3}, DataType::f32, Tag::oihw}, onednn_engine(),
                 weight_.data_ptr());
    at::Tensor packed = at::empty({static_cast<int64_t>(desc.get_size())}, at::kByte);
    memory target(desc, onednn_engine(), packed.data_ptr());
    dnnl::reorder(plain, target).execute(onednn_thread_stream(), plain, target);
    onednn_thread_stream().wait();
    into.descs.push_back(desc);
    into.packed.push_back(packed);
  };
  if (!layouts) {
    // Every layout the chunk sizes need, transformed now: this first call runs
    // in the optimizer's arena scope, later ones would not.
    layouts = std::make_unique<Layouts>();
    for (int64_t n = 1; n <= kMaxChunk; ++n) {
      transform(*layouts, conv_desc(n, in_channels(), out_channels(), height, width, relu_, plain_input_).weights_desc());
    }
  }
  auto pd = conv_desc(chunk, in_channels(), out_channels(), height, width, relu_, plain_input_);
  auto made = std::make_unique<Primitive>();
  auto found = std::find(layouts->descs.begin(), layouts->descs.end(), pd.weights_desc());
  if (found == layouts->descs.end()) {
    // oneDNN chose a layout the optimizer's pass did not make: the layouts
    // were transformed in the supervisor, and a process-mode worker with two
    // intra-op threads asked for another ("no transformed weights for a chunk
    // of 1" was a failed run). Transformed here, in this process's own memory.
    transform(*layouts, pd.weights_desc());
    found = layouts->descs.end() - 1;
  }
  made->weights = layouts->packed[static_cast<size_t>(found - layouts->descs.begin())].data_ptr();
  made->weights_desc = pd.weights_desc();
  made->src_desc = pd.src_desc();
  made->dst_desc = pd.dst_desc();
  made->scratch_bytes = pd.scratchpad_desc().get_size();
  made->conv = dnnl::convolution_forward(pd);
  return *primitives_.emplace(key, std::move(made)).first->second;
}

void WinogradConv::execute(int64_t chunk, int64_t height, int64_t width, const float* src, float* dst) {
  const Primitive& p = primitive(chunk, height, width);
  memory src_mem(p.src_desc, onednn_engine(), const_cast<float*>(src));
  memory weights(p.weights_desc, onednn_engine(), p.weights);
  memory bias({{out_channels()}, DataType::f32, Tag::x}, onednn_engine(), bias_.data_ptr());
  memory dst_mem(p.dst_desc, onednn_engine(), dst);
  memory pad({{static_cast<int64_t>(p.scratch_bytes)}, DataType::u8, Tag::x}, onednn_engine(),
             onednn_thread_scratch(p.scratch_bytes));
  p.conv.execute(onednn_thread_stream(), {{DNNL_ARG_SRC, src_mem},
                                   {DNNL_ARG_WEIGHTS, weights},
                                   {DNNL_ARG_BIAS, bias},
                                   {DNNL_ARG_DST, dst_mem},
                                   {DNNL_ARG_SCRATCHPAD, pad}});
  onednn_thread_stream().wait();
}

void WinogradConv::set_chunk(int64_t items) {
  TORCH_CHECK(items >= 1 && items <= kMaxChunk, "WinogradConv: a chunk of ", items, " items (1..", kMaxChunk, ")");
  chunk_.store(items, std::memory_order_relaxed);
}

void WinogradConv::set_probe(bool on) {
  probing_ = on;
  probe_seconds_ = 0;
  probe_items_ = 0;
}

double WinogradConv::probe_seconds_per_item() const {
  return probe_items_ > 0 ? probe_seconds_ / static_cast<double>(probe_items_) : 0;
}

at::Tensor WinogradConv::run(const at::Tensor& x) {
  if (plain_input_) {
    TORCH_CHECK(x.dim() == 4 && x.size(1) == in_channels() && x.scalar_type() == at::kFloat,
                "WinogradConv: input must be fp32 [N, ", in_channels(), ", H, W], got ", x.sizes(), " ",
                x.scalar_type());
  } else {
    TORCH_CHECK(x.dim() == 5 && x.size(4) == kChannelBlock && x.scalar_type() == at::kFloat,
                "WinogradConv: input must be blocked fp32 [N, C/16, H, W, 16], got ", x.sizes(), " ", x.scalar_type());
    TORCH_CHECK(x.size(1) * kChannelBlock == in_channels(), "WinogradConv: input has ", x.size(1) * kChannelBlock,
                " channels, the weights ", in_channels());
  }
  apply_libtorch_threads();
  const at::Tensor input = x.contiguous();
  const int64_t n = input.size(0), h = input.size(2), w = input.size(3);  // both layouts
  at::Tensor out = at::empty({n, out_channels() / kChannelBlock, h, w, kChannelBlock}, input.options());
  if (n == 0) return out;
  const int64_t in_item = input[0].numel(), out_item = out.numel() / n;
  const int64_t chunk = this->chunk();
  // The clock only while calibrating: this runs once per layer per forward.
  const auto started = probing_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  for (int64_t start = 0; start < n; start += chunk) {
    execute(std::min(chunk, n - start), h, w, input.data_ptr<float>() + start * in_item,
            out.data_ptr<float>() + start * out_item);
  }
  if (probing_) {
    probe_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    probe_items_ += n;
  }
  return out;
}

at::Tensor to_blocked(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 4 && x.size(1) % kChannelBlock == 0,
              "to_blocked: want [N, C, H, W] with C a multiple of 16, got ", x.sizes());
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  return x.reshape({n, c / kChannelBlock, kChannelBlock, h, w}).permute({0, 1, 3, 4, 2}).contiguous();
}

at::Tensor from_blocked(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 5 && x.size(4) == kChannelBlock, "from_blocked: want [N, C/16, H, W, 16], got ", x.sizes());
  const int64_t n = x.size(0), blocks = x.size(1), h = x.size(2), w = x.size(3);
  return x.permute({0, 1, 4, 2, 3}).reshape({n, blocks * kChannelBlock, h, w}).contiguous();
}

at::Tensor pool_blocked(const at::Tensor& x, const std::function<at::Tensor(const at::Tensor&)>& pool) {
  TORCH_CHECK(x.dim() == 5 && x.size(4) == kChannelBlock, "pool_blocked: want [N, C/16, H, W, 16], got ", x.sizes());
  const int64_t n = x.size(0), blocks = x.size(1);
  // [N*C/16, H, W, 16] is channels-last [N*C/16, 16, H, W]: ATen pools it as such.
  const at::Tensor pooled = pool(x.reshape({n * blocks, x.size(2), x.size(3), kChannelBlock}).permute({0, 3, 1, 2}));
  return pooled.permute({0, 2, 3, 1}).contiguous().view({n, blocks, pooled.size(2), pooled.size(3), kChannelBlock});
}

namespace {

at::Tensor winograd_conv3x3_op(const at::Tensor& x, const c10::intrusive_ptr<WinogradConv>& conv) {
  return conv->run(x);
}

at::Tensor avg_pool2d_blocked_op(const at::Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                                 std::vector<int64_t> padding, bool ceil_mode, bool count_include_pad,
                                 c10::optional<int64_t> divisor) {
  return pool_blocked(x, [&](const at::Tensor& v) {
    return at::avg_pool2d(v, kernel, stride, padding, ceil_mode, count_include_pad, divisor);
  });
}

at::Tensor max_pool2d_blocked_op(const at::Tensor& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                                 std::vector<int64_t> padding, std::vector<int64_t> dilation, bool ceil_mode) {
  return pool_blocked(x, [&](const at::Tensor& v) { return at::max_pool2d(v, kernel, stride, padding, dilation, ceil_mode); });
}

}  // namespace

TORCH_LIBRARY(corepool, m) {
  m.class_<WinogradConv>("WinogradConv");
  m.def("winograd_conv3x3(Tensor x, __torch__.torch.classes.corepool.WinogradConv conv) -> Tensor",
        winograd_conv3x3_op);
  m.def("to_blocked(Tensor x) -> Tensor", to_blocked);
  m.def("from_blocked(Tensor x) -> Tensor", from_blocked);
  m.def("avg_pool2d_blocked(Tensor x, int[] kernel_size, int[] stride, int[] padding, bool ceil_mode, "
        "bool count_include_pad, int? divisor_override) -> Tensor",
        avg_pool2d_blocked_op);
  m.def("max_pool2d_blocked(Tensor x, int[] kernel_size, int[] stride, int[] padding, int[] dilation, "
        "bool ceil_mode) -> Tensor",
        max_pool2d_blocked_op);
}

}  // namespace corepool
