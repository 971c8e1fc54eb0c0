// A 3x3 convolution (stride 1, padding 1, no dilation, one group) run by
// oneDNN's Winograd kernel, and the blocked activation layout it reads and
// writes. Winograd F(4x4, 3x3) does a quarter of the multiplications of a
// direct convolution, so on a core that already runs direct convolutions at its
// FMA peak it is the only way further (bench/RESULTS.md). Used by the graph
// pass in winograd_rewrite.cc; the ops are registered as corepool::* TorchScript
// operators when this file's library is loaded.
//
// Blocked layout ("nChw16c"): a [N, C, H, W] activation stored as a dense
// [N, C/16, H, W, 16] tensor, the layout oneDNN's kernels want. Keeping
// activations blocked between convolutions avoids a reorder per layer.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <torch/custom_class.h>
#include <torch/script.h>

namespace corepool {

// The channel block of the layout above (oneDNN's AVX-512 block).
constexpr int64_t kChannelBlock = 16;

// Whether this CPU's oneDNN runs a Winograd convolution from `in` to `out`
// channels (multiples of kChannelBlock; an AVX-512 core). Probed once per shape.
bool winograd_available(int64_t in_channels, int64_t out_channels);
// Whether it runs a jitted direct convolution from plain NCHW input whose
// channels do not fill a block (the network's first layer, e.g. one log-mel
// channel) to blocked output with a multiple of kChannelBlock channels.
bool plain_input_available(int64_t in_channels, int64_t out_channels);

// One convolution layer: its weights as given (OIHW, fp32), its bias, whether a
// ReLU is fused, and the weights pre-transformed into the layouts oneDNN's
// Winograd kernels use. Those layouts depend on the batch size oneDNN sees, so
// a batch runs in chunks (below), and the weights are transformed once for every layout
// the chunk sizes 1..kMaxChunk need (two or three), the first time a spatial
// size is seen. The first forward runs inside the optimizer's WeightArena scope
// (optimize.cc), so the transformed weights land in the arena: one physical
// copy for every worker.
//
// How many items go to oneDNN per call (the chunk) is set per layer by the
// optimizer (winograd_calibrate.h), measured inside whole forwards: a large
// feature map runs fastest a few items at a time (its transformed tiles stay
// in cache), a small one with many (an 8x12 map has only six 4x4 tiles per
// item, too few to keep the kernel busy). On CNN10 the best chunk ran from 1
// to 8 across its layers; at each layer's best its convolutions cost 12.3 ms
// per segment against 14.8 ms with 2 items for all (bench/RESULTS.md).
// A layer made with `plain_input` reads plain NCHW input (channels that do not
// fill a block: the network's first convolution) and runs oneDNN's direct
// kernel instead, writing the blocked layout for the Winograd layers after it:
// the chain then starts without LibTorch's reorder, ReLU and conversion passes
// over the largest activation, and in chunks like the rest.
// Thread-safe: engine threads share one object; its caches are behind a mutex.
class WinogradConv : public torch::CustomClassHolder {
 public:
  static constexpr int64_t kMaxChunk = 8;
  static constexpr int64_t kDefaultChunk = 2;  // until set_chunk

  WinogradConv(at::Tensor weight, c10::optional<at::Tensor> bias, bool relu, bool plain_input = false);
  ~WinogradConv() override;

  // x: blocked [N, C/16, H, W, 16] fp32 (plain_input: [N, C, H, W]) -> blocked [N, O/16, H, W, 16].
  at::Tensor run(const at::Tensor& x);

  int64_t chunk() const { return chunk_.load(std::memory_order_relaxed); }
  // 1..kMaxChunk, else c10::Error.
  void set_chunk(int64_t items);

  // Calibration's clock: while on, run() adds its wall time and item count.
  // Only for the optimizer's single thread, before any engine runs the module.
  void set_probe(bool on);
  double probe_seconds_per_item() const;

  int64_t in_channels() const { return weight_.size(1); }
  int64_t out_channels() const { return weight_.size(0); }
  bool relu() const { return relu_; }
  bool plain_input() const { return plain_input_; }

 private:
  struct Layouts;    // the transformed weights for one spatial size
  struct Primitive;  // a oneDNN primitive for one (chunk, H, W)
  const Primitive& primitive(int64_t chunk, int64_t height, int64_t width);
  // One oneDNN call on `chunk` items: src and dst point at the first item.
  void execute(int64_t chunk, int64_t height, int64_t width, const float* src, float* dst);

  at::Tensor weight_;  // OIHW fp32, contiguous
  at::Tensor bias_;    // [O] fp32 (zeros without a bias)
  bool relu_;
  bool plain_input_;
  std::atomic<int64_t> chunk_{kDefaultChunk};
  std::mutex mu_;  // guards the two maps; a lookup holds it only briefly
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Layouts>> layouts_;  // by (H, W)
  std::map<std::vector<int64_t>, std::unique_ptr<Primitive>> primitives_;   // by (chunk, H, W)
  bool probing_ = false;
  double probe_seconds_ = 0;
  int64_t probe_items_ = 0;
};

// The layout conversions and pooling on blocked activations (the ops call these).
at::Tensor to_blocked(const at::Tensor& x);    // [N, C, H, W] -> [N, C/16, H, W, 16]
at::Tensor from_blocked(const at::Tensor& x);  // the inverse
// Applies `pool` (an ATen 2-D pooling call on an NCHW tensor) to a blocked tensor
// without converting it: each block is a channels-last [N*C/16, 16, H, W] view.
at::Tensor pool_blocked(const at::Tensor& x, const std::function<at::Tensor(const at::Tensor&)>& pool);

}  // namespace corepool
