// Three steps over the frozen graph, each a plain walk in topological order:
// 1. conv -> to_blocked, winograd_conv3x3, from_blocked (a following ReLU fused;
//    no to_blocked for a layer that reads plain input);
// 2. a 2-D pool whose input comes from from_blocked pools the blocked tensor;
// 3. to_blocked(from_blocked(x)) -> x; dead conversions are then removed.
// Or, on corepool's own path (or auto where oneDNN has no Winograd), one walk:
// conv (+ ReLU, + 2x2 average pool) -> winograd_f43.
#include "worker/optimize/winograd_rewrite.h"

#include <algorithm>

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include "worker/optimize/graph_match.h"
#include "worker/kernels/winograd_conv.h"
#include "worker/kernels/winograd_f43.h"

namespace corepool {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kToBlocked = c10::Symbol::fromQualString("corepool::to_blocked");
const c10::Symbol kFromBlocked = c10::Symbol::fromQualString("corepool::from_blocked");
const c10::Symbol kWinograd = c10::Symbol::fromQualString("corepool::winograd_conv3x3");
const c10::Symbol kWinogradF43 = c10::Symbol::fromQualString("corepool::winograd_f43");

bool list_is(const Value* v, std::vector<int64_t> want) {
  const auto got = torch::jit::constant_as<std::vector<int64_t>>(v);
  return got.has_value() && *got == want;
}

// The constant fp32 [O, C, 3, 3] weights of a 3x3 convolution with stride 1,
// padding 1, no dilation and one group (Winograd's case), or undefined.
at::Tensor conv3x3_weights(const Node* conv) {
  if (conv->kind() != c10::Symbol::fromQualString("aten::conv2d") || conv->inputs().size() != 7) return {};
  const auto weight = torch::jit::constant_as<at::Tensor>(conv->input(1));
  if (!weight || weight->dim() != 4 || weight->scalar_type() != at::kFloat) return {};
  if (weight->size(2) != 3 || weight->size(3) != 3) return {};
  if (!list_is(conv->input(3), {1, 1}) || !list_is(conv->input(4), {1, 1}) || !list_is(conv->input(5), {1, 1})) return {};
  if (torch::jit::constant_as<int64_t>(conv->input(6)) != c10::optional<int64_t>(1)) return {};
  const auto bias = torch::jit::toIValue(conv->input(2));
  if (!bias || !(bias->isNone() || (bias->isTensor() && bias->toTensor().scalar_type() == at::kFloat))) return {};
  return *weight;
}

// The weights of a convolution oneDNN's Winograd (or its direct kernel from
// plain input) can run, or undefined.
at::Tensor winograd_weights(const Node* conv) {
  const at::Tensor weight = conv3x3_weights(conv);
  if (!weight.defined()) return {};
  if (!winograd_available(weight.size(1), weight.size(0)) && !plain_input_available(weight.size(1), weight.size(0))) {
    return {};
  }
  return weight;
}

c10::optional<at::Tensor> bias_of(const Node* conv) {
  const auto bias_value = torch::jit::toIValue(conv->input(2));
  if (bias_value->isTensor()) return bias_value->toTensor();
  return c10::nullopt;
}

Value* insert_call(Graph& graph, c10::Symbol op, std::vector<Value*> inputs) {
  Node* n = graph.insertNode(graph.create(op, inputs));
  n->output()->setType(c10::TensorType::get());
  return n->output();
}

// Replaces one eligible convolution; returns 0 (not eligible), 1 (Winograd)
// or 2 (direct from plain input).
int replace_conv(Graph& graph, Node* conv) {
  const at::Tensor weight = winograd_weights(conv);
  if (!weight.defined()) return 0;
  const c10::optional<at::Tensor> bias = bias_of(conv);
  Node* relu = sole_relu(conv->output());
  torch::jit::WithInsertPoint guard(relu ? relu : conv);
  // Input channels that do not fill a block: a direct convolution from plain input.
  const bool plain_input = weight.size(1) % kChannelBlock != 0;
  Value* ctx =
      graph.insertConstant(c10::IValue(c10::make_intrusive<WinogradConv>(weight, bias, relu != nullptr, plain_input)));
  Value* in = plain_input ? conv->input(0) : insert_call(graph, kToBlocked, {conv->input(0)});
  Value* out = insert_call(graph, kFromBlocked, {insert_call(graph, kWinograd, {in, ctx})});
  Node* last = relu ? relu : conv;
  last->output()->replaceAllUsesWith(out);
  if (relu) relu->destroy();
  conv->destroy();
  return plain_input ? 2 : 1;
}

// The avg_pool2d that is the only use of `v`, if it is the one WinogradF43
// can fuse: 2x2, stride 2, no padding, floor, no divisor override
// (count_include_pad does not matter without padding).
Node* sole_pool2x2(Value* v) {
  if (v->uses().size() != 1) return nullptr;
  Node* pool = v->uses()[0].user;
  if (pool->kind() != c10::Symbol::fromQualString("aten::avg_pool2d") || pool->inputs().size() != 7) return nullptr;
  const bool stride_ok = list_is(pool->input(2), {2, 2}) || list_is(pool->input(2), {});
  const auto ceil_mode = torch::jit::constant_as<bool>(pool->input(4));
  const auto divisor = torch::jit::toIValue(pool->input(6));
  if (!list_is(pool->input(1), {2, 2}) || !stride_ok || !list_is(pool->input(3), {0, 0})) return nullptr;
  if (ceil_mode != c10::optional<bool>(false) || !divisor || !divisor->isNone()) return nullptr;
  return pool;
}

// No oneDNN Winograd on this CPU: corepool's own F(4x4, 3x3) on NCHW
// (winograd_f43.h) for a convolution with enough input channels, its ReLU
// and a 2x2 average pool after it fused. Returns 0 (not replaced), 1
// (replaced) or 2 (replaced, pool fused).
int replace_conv_f43(Graph& graph, Node* conv, bool portable, WinogradRewrite& done) {
  const at::Tensor weight = conv3x3_weights(conv);
  if (!weight.defined() || weight.size(1) < WinogradF43::kMinInChannels) return 0;
  Node* relu = sole_relu(conv->output());
  Node* pool = sole_pool2x2((relu ? relu : conv)->output());
  Node* last = pool ? pool : relu ? relu : conv;
  torch::jit::WithInsertPoint guard(last);
  WinogradF43::Options options;
  options.avg_pool = pool != nullptr;
  options.portable = portable;
  const auto layer = c10::make_intrusive<WinogradF43>(weight, bias_of(conv), relu != nullptr, options);
  done.own_portable += !(layer->avx2() && layer->packed());
  Value* ctx = graph.insertConstant(c10::IValue(layer));
  Value* out = insert_call(graph, kWinogradF43, {conv->input(0), ctx});
  last->output()->replaceAllUsesWith(out);
  for (Node* n : {pool, relu, conv}) {
    if (n) n->destroy();
  }
  return pool ? 2 : 1;
}

// avg_pool2d / max_pool2d of a from_blocked: the same pooling on the blocked tensor.
void replace_pool(Graph& graph, Node* pool) {
  const std::string kind = pool->kind().toQualString();
  const char* blocked_op = kind == "aten::avg_pool2d" ? "corepool::avg_pool2d_blocked"
                           : kind == "aten::max_pool2d" ? "corepool::max_pool2d_blocked"
                                                        : nullptr;
  if (!blocked_op || pool->input(0)->node()->kind() != kFromBlocked) return;
  torch::jit::WithInsertPoint guard(pool);
  std::vector<Value*> inputs(pool->inputs().begin(), pool->inputs().end());
  inputs[0] = pool->input(0)->node()->input(0);
  Value* out = insert_call(graph, kFromBlocked, {insert_call(graph, c10::Symbol::fromQualString(blocked_op), inputs)});
  pool->output()->replaceAllUsesWith(out);
  pool->destroy();
}

// The top-level nodes of one kind, collected before a step changes the graph.
std::vector<Node*> nodes_of(Graph& graph, const char* kind) {
  std::vector<Node*> out;
  for (Node* n : graph.nodes()) {
    if (n->kind() == c10::Symbol::fromQualString(kind)) out.push_back(n);
  }
  return out;
}

void cancel_round_trips(Graph& graph) {
  for (Node* n : graph.nodes()) {
    if (n->kind() == kToBlocked && n->input(0)->node()->kind() == kFromBlocked) {
      n->output()->replaceAllUsesWith(n->input(0)->node()->input(0));
    }
  }
}

}  // namespace

WinogradRewrite rewrite_own_winograd(torch::jit::Module& frozen, bool portable) {
  std::shared_ptr<Graph> graph = frozen.get_method("forward").graph();
  WinogradRewrite done;
  for (Node* n : nodes_of(*graph, "aten::conv2d")) {
    const int kind = replace_conv_f43(*graph, n, portable, done);
    done.own += kind > 0;
    done.own_pooled += kind == 2;
  }
  torch::jit::EliminateDeadCode(graph);
  return done;
}

WinogradRewrite rewrite_winograd(torch::jit::Module& frozen, KernelPath path) {
  if (path == KernelPath::kTorch) return {};
  if (path == KernelPath::kCorepool || path == KernelPath::kPortable) {
    return rewrite_own_winograd(frozen, path == KernelPath::kPortable);
  }
  std::shared_ptr<Graph> graph = frozen.get_method("forward").graph();
  WinogradRewrite done;
  // Only the top-level block: a convolution inside an if or a loop stays as it is.
  const std::vector<Node*> convs = nodes_of(*graph, "aten::conv2d");
  // A direct layer from plain input only pays as the start of a Winograd chain.
  const bool any_winograd = std::any_of(convs.begin(), convs.end(), [](const Node* n) {
    const at::Tensor w = winograd_weights(n);
    return w.defined() && w.size(1) % kChannelBlock == 0;
  });
  if (!any_winograd && path == KernelPath::kAuto) return rewrite_own_winograd(frozen, false);
  if (!any_winograd) return done;  // onednn: no convolution its Winograd takes
  for (Node* n : convs) {
    const int kind = replace_conv(*graph, n);
    done.winograd += kind == 1;
    done.direct += kind == 2;
  }
  std::vector<Node*> pools = nodes_of(*graph, "aten::avg_pool2d");
  for (Node* n : nodes_of(*graph, "aten::max_pool2d")) pools.push_back(n);
  for (Node* n : pools) replace_pool(*graph, n);
  cancel_round_trips(*graph);
  torch::jit::EliminateDeadCode(graph);
  return done;
}

}  // namespace corepool
