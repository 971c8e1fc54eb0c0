// Both caches are per thread (no locks on the path of every call) and live as
// long as the thread. A primitive is made once per (T, N, C, H) and kept while
// it is among the thread's kLstmPrimitivesPerThread most recently used. The
// weights are reordered once per weight set and layout: oneDNN may choose
// another weights layout for another T or N (its packed GEMM formats depend on
// the row count), so a primitive reads the copy made for the layout it was
// built with. Primitives whose layouts are equal share one copy; on AVX-512
// (the brgemm kernel) that was every T and N tried, so one copy per weight set.
#include "worker/kernels/lstm_sequence.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <torch/library.h>

#include "worker/kernels/onednn_context.h"

namespace corepool {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using DataType = memory::data_type;

constexpr const char* kOp = "corepool::lstm";

struct Sizes {
  int64_t t, n, c, h;
};

void check_type(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.defined(), kOp, ": ", name, " is undefined");
  TORCH_CHECK(t.scalar_type() == at::kFloat && t.device().is_cpu() && t.layout() == at::kStrided, kOp, ": ", name,
              " must be a dense float32 CPU tensor, got ", t.scalar_type(), " on ", t.device(), " (", t.layout(), ")");
}

// `meaning` spells the expected shape in letters ("[4H, C]"), `shape` in numbers.
void check_arg(const at::Tensor& t, const char* name, const char* meaning, at::IntArrayRef shape) {
  check_type(t, name);
  TORCH_CHECK(t.sizes() == shape, kOp, ": ", name, " must be ", meaning, " = ", shape, ", got ", t.sizes());
}

// T, N and C come from x, H from h0; every other argument must agree with them.
Sizes checked_sizes(const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0, const at::Tensor& w_ih,
                    const at::Tensor& w_hh, const at::Tensor& b_ih, const at::Tensor& b_hh) {
  check_type(x, "x");
  TORCH_CHECK(x.dim() == 3, kOp, ": x must be [T, N, C], got ", x.sizes());
  check_type(h0, "h0");
  TORCH_CHECK(h0.dim() == 2 && h0.size(0) == x.size(1), kOp, ": h0 must be [N, H] with N = ", x.size(1),
              " (x's batch), got ", h0.sizes());
  const Sizes s{x.size(0), x.size(1), x.size(2), h0.size(1)};
  TORCH_CHECK(s.c > 0 && s.h > 0, kOp, ": needs C > 0 and H > 0, got C = ", s.c, " (x ", x.sizes(), ") and H = ", s.h,
              " (h0 ", h0.sizes(), ")");
  check_arg(c0, "c0", "[N, H]", {s.n, s.h});
  check_arg(w_ih, "w_ih", "[4H, C]", {4 * s.h, s.c});
  check_arg(w_hh, "w_hh", "[4H, H]", {4 * s.h, s.h});
  check_arg(b_ih, "b_ih", "[4H]", {4 * s.h});
  check_arg(b_hh, "b_hh", "[4H]", {4 * s.h});
  return s;
}

// The plain layouts of the tensors the caller gives and gets: x and out
// [T, N, C|H] are oneDNN's tnc, the states [N, H] its ldnc with L = D = 1.
memory::desc sequence_desc(int64_t t, int64_t n, int64_t c) { return {{t, n, c}, DataType::f32, Tag::tnc}; }
memory::desc state_desc(int64_t n, int64_t h) { return {{1, 1, n, h}, DataType::f32, Tag::ldnc}; }
memory::desc bias_desc(int64_t h) { return {{1, 1, 4, h}, DataType::f32, Tag::ldgo}; }

// Weights in whatever layout the kernel wants (format_tag::any): reordered
// once, they are read at every step of every call.
dnnl::lstm_forward::primitive_desc lstm_desc(const Sizes& s) {
  const memory::desc weights_layer({1, 1, s.c, 4, s.h}, DataType::f32, Tag::any);
  const memory::desc weights_iter({1, 1, s.h, 4, s.h}, DataType::f32, Tag::any);
  const dnnl::lstm_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::rnn_direction::unidirectional_left2right,
                                   sequence_desc(s.t, s.n, s.c), state_desc(s.n, s.h), state_desc(s.n, s.h),
                                   weights_layer, weights_iter, bias_desc(s.h), sequence_desc(s.t, s.n, s.h),
                                   state_desc(s.n, s.h), state_desc(s.n, s.h));
  return dnnl::lstm_forward::primitive_desc(d, inference_attr(false), onednn_engine());
}

struct WeightsLayout {
  memory::desc layer, iter;
};

// This thread's distinct weight layouts; a layout's number is its index. A
// number compares faster than two descriptors on every call.
size_t layout_number(const memory::desc& layer, const memory::desc& iter) {
  thread_local std::vector<WeightsLayout> layouts;
  for (size_t i = 0; i < layouts.size(); ++i) {
    if (layouts[i].layer == layer && layouts[i].iter == iter) return i;
  }
  layouts.push_back({layer, iter});
  return layouts.size() - 1;
}

// The primitive and its arguments' memory objects, made once: a call only
// points them at its tensors (set_data_handle). Making ten memory objects per
// call instead made a one-step call (N = 1, C = H = 128) take 11.6 us, not 8.3.
struct Primitive {
  dnnl::lstm_forward lstm;
  WeightsLayout weights;
  size_t layout = 0;  // layout_number(weights)
  size_t scratch_bytes = 0;
  std::unordered_map<int, memory> args;
  uint64_t last_use = 0;
};

std::unordered_map<int, memory> unbound_args(const dnnl::lstm_forward::primitive_desc& pd) {
  auto unbound = [](const memory::desc& desc) { return memory(desc, onednn_engine(), nullptr); };
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC_LAYER, unbound(pd.src_layer_desc())},
                                       {DNNL_ARG_SRC_ITER, unbound(pd.src_iter_desc())},
                                       {DNNL_ARG_SRC_ITER_C, unbound(pd.src_iter_c_desc())},
                                       {DNNL_ARG_WEIGHTS_LAYER, unbound(pd.weights_layer_desc())},
                                       {DNNL_ARG_WEIGHTS_ITER, unbound(pd.weights_iter_desc())},
                                       {DNNL_ARG_BIAS, unbound(pd.bias_desc())},
                                       {DNNL_ARG_DST_LAYER, unbound(pd.dst_layer_desc())},
                                       {DNNL_ARG_DST_ITER, unbound(pd.dst_iter_desc())},
                                       {DNNL_ARG_DST_ITER_C, unbound(pd.dst_iter_c_desc())}};
  if (pd.scratchpad_desc().get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, unbound(pd.scratchpad_desc()));
  return args;
}

using PrimitiveKey = std::array<int64_t, 5>;  // T, N, C, H, threads

// The least recently used primitive goes when the thread has
// kLstmPrimitivesPerThread: one costs about 150 kB (its GEMM kernels), and
// every (T, N) of 1..256 each would be 10 GB per thread. Made again, it is
// usually found in oneDNN's own primitive cache (1024 primitives, all threads).
void evict_least_recently_used(std::map<PrimitiveKey, Primitive>& primitives) {
  auto oldest = primitives.begin();
  for (auto it = primitives.begin(); it != primitives.end(); ++it) {
    if (it->second.last_use < oldest->second.last_use) oldest = it;
  }
  primitives.erase(oldest);
}

Primitive make_primitive(const Sizes& s) {
  const auto pd = lstm_desc(s);
  Primitive made;
  made.weights = {pd.weights_layer_desc(), pd.weights_iter_desc()};
  made.layout = layout_number(made.weights.layer, made.weights.iter);
  made.scratch_bytes = pd.scratchpad_desc().get_size();
  made.args = unbound_args(pd);
  made.lstm = dnnl::lstm_forward(pd);
  return made;
}

// The thread count is part of the key: oneDNN sizes a primitive's scratchpad
// and splits its work for the count it was made with.
Primitive& primitive(const Sizes& s) {
  thread_local std::map<PrimitiveKey, Primitive> primitives;
  thread_local uint64_t clock = 0;
  const PrimitiveKey key{s.t, s.n, s.c, s.h, at::get_num_threads()};
  auto it = primitives.find(key);
  if (it == primitives.end()) {
    if (primitives.size() >= kLstmPrimitivesPerThread) evict_least_recently_used(primitives);
    it = primitives.emplace(key, make_primitive(s)).first;
  }
  it->second.last_use = ++clock;
  return it->second;
}

// One of the caller's weight tensors as the cache recognizes it. The weak
// reference keeps the StorageImpl object (not its data) allocated, so no other
// storage can take its address while the entry exists: a model freed and
// another loaded where it was is never served the first one's weights. Once
// the storage is gone, the entry is dropped at the next miss.
class Source {
 public:
  explicit Source(const at::Tensor& t)
      : data_(t.data_ptr()), storage_(t.storage().getWeakStorageImpl()), strides_(t.strides().vec()) {}
  bool is(const at::Tensor& t) const {
    return data_ == t.data_ptr() && storage_._unsafe_get_target() == t.storage().unsafeGetStorageImpl() &&
           t.strides() == at::IntArrayRef(strides_);
  }
  bool alive() const { return !storage_.expired(); }

 private:
  const void* data_;
  c10::weak_intrusive_ptr<c10::StorageImpl> storage_;
  std::vector<int64_t> strides_;
};

// From malloc, never the c10 allocator: a thread's cache filled inside the
// optimizer's WeightArena scope would otherwise sit in the arena, which the
// cache may outlive; and being per thread, there is nothing to share anyway.
using Buffer = std::unique_ptr<void, decltype(&std::free)>;

Buffer allocate(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  Buffer buffer(std::aligned_alloc(64, rounded), &std::free);
  TORCH_CHECK(buffer, kOp, ": cannot allocate ", rounded, " bytes for the reordered weights");
  return buffer;
}

struct Weights {
  size_t layout;
  std::array<Source, 4> sources;  // w_ih, w_hh, b_ih, b_hh
  Buffer layer, iter;
  std::vector<float> bias;  // b_ih + b_hh, [4H] = {1, 1, 4, H} ldgo
};

// Copies the plain PyTorch weights `plain` ([4H, rows] row-major, which is
// oneDNN's {1, 1, rows, 4, H} ldgoi) into `target`'s layout.
Buffer reordered(const at::Tensor& plain, const memory::desc& target) {
  const at::Tensor dense = plain.contiguous();
  const int64_t h = plain.size(0) / 4;
  memory from({{1, 1, plain.size(1), 4, h}, DataType::f32, Tag::ldgoi}, onednn_engine(), dense.data_ptr());
  Buffer buffer = allocate(target.get_size());
  memory to(target, onednn_engine(), buffer.get());
  dnnl::reorder(from, to).execute(onednn_thread_stream(), from, to);
  onednn_thread_stream().wait();
  return buffer;
}

Weights make_weights(const Primitive& p, const at::Tensor& w_ih, const at::Tensor& w_hh, const at::Tensor& b_ih,
                     const at::Tensor& b_hh) {
  const at::Tensor bias = (b_ih + b_hh).contiguous();
  const float* sum = bias.data_ptr<float>();
  return {p.layout,
          {Source(w_ih), Source(w_hh), Source(b_ih), Source(b_hh)},
          reordered(w_ih, p.weights.layer),
          reordered(w_hh, p.weights.iter),
          std::vector<float>(sum, sum + bias.numel())};
}

// A handful of entries per thread (one per LSTM layer and layout): a linear
// search costs less than hashing the key.
Weights& weights(const Primitive& p, const at::Tensor& w_ih, const at::Tensor& w_hh, const at::Tensor& b_ih,
                 const at::Tensor& b_hh) {
  thread_local std::vector<Weights> cache;
  for (Weights& w : cache) {
    if (w.layout == p.layout && w.sources[0].is(w_ih) && w.sources[1].is(w_hh) && w.sources[2].is(b_ih) &&
        w.sources[3].is(b_hh)) {
      return w;
    }
  }
  cache.erase(std::remove_if(cache.begin(), cache.end(),
                             [](const Weights& w) {
                               for (const Source& s : w.sources) {
                                 if (!s.alive()) return true;
                               }
                               return false;
                             }),
              cache.end());
  cache.push_back(make_weights(p, w_ih, w_hh, b_ih, b_hh));
  return cache.back();
}

// Points p's arguments at the tensors' and weights' data as they are (no
// copies) and runs it. Not reentrant, like everything per thread here.
void run(Primitive& p, const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0, const Weights& w,
         at::Tensor& out, at::Tensor& h, at::Tensor& c) {
  auto bind = [&p](int arg, const void* data) { p.args.at(arg).set_data_handle(const_cast<void*>(data)); };
  // oneDNN never writes its inputs.
  bind(DNNL_ARG_SRC_LAYER, x.data_ptr());
  bind(DNNL_ARG_SRC_ITER, h0.data_ptr());
  bind(DNNL_ARG_SRC_ITER_C, c0.data_ptr());
  bind(DNNL_ARG_WEIGHTS_LAYER, w.layer.get());
  bind(DNNL_ARG_WEIGHTS_ITER, w.iter.get());
  bind(DNNL_ARG_BIAS, w.bias.data());
  bind(DNNL_ARG_DST_LAYER, out.data_ptr());
  bind(DNNL_ARG_DST_ITER, h.data_ptr());
  bind(DNNL_ARG_DST_ITER_C, c.data_ptr());
  if (p.scratch_bytes > 0) bind(DNNL_ARG_SCRATCHPAD, onednn_thread_scratch(p.scratch_bytes));
  p.lstm.execute(onednn_thread_stream(), p.args);
  onednn_thread_stream().wait();
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_sequence(const at::Tensor& x, const at::Tensor& h0,
                                                             const at::Tensor& c0, const at::Tensor& w_ih,
                                                             const at::Tensor& w_hh, const at::Tensor& b_ih,
                                                             const at::Tensor& b_hh) {
  const Sizes s = checked_sizes(x, h0, c0, w_ih, w_hh, b_ih, b_hh);
  at::Tensor out = at::empty({s.t, s.n, s.h}, at::kFloat);
  // Nothing to run (oneDNN rejects zero sizes): the state passes through.
  if (s.t == 0 || s.n == 0) {
    return {out, h0.clone(at::MemoryFormat::Contiguous), c0.clone(at::MemoryFormat::Contiguous)};
  }
  at::Tensor h = at::empty({s.n, s.h}, at::kFloat), c = at::empty({s.n, s.h}, at::kFloat);
  apply_libtorch_threads();
  Primitive& p = primitive(s);
  const Weights& w = weights(p, w_ih, w_hh, b_ih, b_hh);
  run(p, x.contiguous(), h0.contiguous(), c0.contiguous(), w, out, h, c);
  return {out, h, c};
}

void link_lstm_sequence_op() {}

// A fragment: the library `corepool` itself is declared in winograd_conv.cc.
TORCH_LIBRARY_FRAGMENT(corepool, m) {
  m.def("lstm(Tensor x, Tensor h0, Tensor c0, Tensor w_ih, Tensor w_hh, Tensor b_ih, Tensor b_hh) "
        "-> (Tensor, Tensor, Tensor)",
        lstm_sequence);
}

}  // namespace corepool
