// One walk over the top-level nodes of the frozen graph: each eligible linear
// or addmm is replaced by a call on an OnednnLinear or PackedLinear constant.
#include "worker/optimize/linear_rewrite.h"

#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include "worker/optimize/graph_match.h"
#include "worker/kernels/onednn_linear.h"
#include "worker/kernels/packed_gemm.h"
#include "worker/kernels/packed_linear.h"

namespace corepool {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

const c10::Symbol kLinear = c10::Symbol::fromQualString("aten::linear");
const c10::Symbol kAddmm = c10::Symbol::fromQualString("aten::addmm");
const c10::Symbol kOnednnLinear = c10::Symbol::fromQualString("corepool::onednn_linear");
const c10::Symbol kPackedLinear = c10::Symbol::fromQualString("corepool::packed_linear");

// A layer's constant parts: weights [out, in] and an optional bias [out].
struct LinearParts {
  at::Tensor weight;
  c10::optional<at::Tensor> bias;
};

bool is_fp32_matrix(const c10::optional<at::Tensor>& t) {
  return t.has_value() && t->dim() == 2 && t->scalar_type() == at::kFloat && !t->is_mkldnn();
}

// An optional fp32 bias of `out` elements: nullopt (none), the tensor, or false when unusable.
bool bias_of(const Value* v, int64_t out, c10::optional<at::Tensor>& bias) {
  const auto value = torch::jit::toIValue(v);
  if (!value) return false;
  if (value->isNone()) return true;
  if (!value->isTensor()) return false;
  const at::Tensor& b = value->toTensor();
  if (b.scalar_type() != at::kFloat || b.is_mkldnn() || b.numel() != out || b.dim() > 2) return false;
  bias = b;
  return true;
}

bool is_one(const Value* v) {
  const auto value = torch::jit::toIValue(v);
  return value && ((value->isInt() && value->toInt() == 1) || (value->isDouble() && value->toDouble() == 1.0));
}

// The parts of an eligible aten::linear(x, W, b) or aten::addmm(b, x, W^T, 1, 1).
std::optional<LinearParts> parts_of(const Node* n) {
  LinearParts parts;
  if (n->kind() == kLinear && n->inputs().size() == 3) {
    const auto weight = torch::jit::constant_as<at::Tensor>(n->input(1));
    if (!is_fp32_matrix(weight)) return std::nullopt;
    parts.weight = *weight;
    if (!bias_of(n->input(2), weight->size(0), parts.bias)) return std::nullopt;
    return parts;
  }
  if (n->kind() == kAddmm && n->inputs().size() == 5 && is_one(n->input(3)) && is_one(n->input(4))) {
    const auto transposed = torch::jit::constant_as<at::Tensor>(n->input(2));  // [in, out]
    if (!is_fp32_matrix(transposed)) return std::nullopt;
    parts.weight = transposed->t();
    // addmm's bias broadcasts against [rows, out]: only a per-output one is a linear layer's.
    if (!bias_of(n->input(0), transposed->size(1), parts.bias) || !parts.bias) return std::nullopt;
    if (parts.bias->dim() == 2 && parts.bias->size(0) != 1) return std::nullopt;
    return parts;
  }
  return std::nullopt;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Who runs a layer on this CPU. oneDNN's brgemm kernels (AVX-512) read the
// weights once per call and were the fastest measured there. Elsewhere oneDNN
// runs x64:gemm:jit, slower than LibTorch's addmm from 2 rows on, so
// corepool's packed kernel takes the layer where the CPU has AVX2 + FMA, and
// oneDNN's jitted gemm only where it has not. Never oneDNN's reference
// kernel: slower than what it would replace. nullopt: keep the layer as it is.
// engine.kernels = corepool takes corepool's kernel, onednn and portable
// oneDNN's (whichever its own ISA dispatch picks), whatever the CPU.
std::optional<c10::IValue> make_layer(const LinearParts& parts, bool relu, KernelPath path, c10::Symbol& kind) {
  if (path == KernelPath::kCorepool) {
    kind = kPackedLinear;
    return c10::IValue(c10::make_intrusive<PackedLinear>(parts.weight, parts.bias, relu));
  }
  std::string onednn;
  try {
    onednn = OnednnLinear::kernel_for(parts.weight.size(0), parts.weight.size(1), relu);
  } catch (const dnnl::error&) {
    // no oneDNN kernel for this shape on this CPU
  }
  if (path == KernelPath::kAuto && !starts_with(onednn, "brgemm") && packed_gemm_available()) {
    kind = kPackedLinear;
    return c10::IValue(c10::make_intrusive<PackedLinear>(parts.weight, parts.bias, relu));
  }
  if (onednn.empty() || starts_with(onednn, "ref")) return std::nullopt;
  kind = kOnednnLinear;
  return c10::IValue(c10::make_intrusive<OnednnLinear>(parts.weight, parts.bias, relu));
}

// Replaces one eligible layer; returns the op it now calls, or nullopt.
std::optional<c10::Symbol> replace(Graph& graph, Node* n, KernelPath path) {
  const std::optional<LinearParts> parts = parts_of(n);
  if (!parts) return std::nullopt;
  Node* relu = sole_relu(n->output());
  c10::Symbol kind;
  const std::optional<c10::IValue> layer = make_layer(*parts, relu != nullptr, path, kind);
  if (!layer) return std::nullopt;
  Value* x = n->kind() == kLinear ? n->input(0) : n->input(1);
  torch::jit::WithInsertPoint guard(relu ? relu : n);
  Value* ctx = graph.insertConstant(*layer);
  Node* call = graph.insertNode(graph.create(kind, {x, ctx}));
  call->output()->setType(c10::TensorType::get());
  Node* last = relu ? relu : n;
  last->output()->replaceAllUsesWith(call->output());
  if (relu) relu->destroy();
  n->destroy();
  return kind;
}

}  // namespace

LinearRewrite rewrite_linear(torch::jit::Module& frozen, KernelPath path) {
  if (path == KernelPath::kTorch) return {};
  std::shared_ptr<Graph> graph = frozen.get_method("forward").graph();
  // Collected first: the walk must not see the nodes it inserts. Only the
  // top-level block: a layer inside an if or a loop stays as it is.
  std::vector<Node*> candidates;
  for (Node* n : graph->nodes()) {
    if (n->kind() == kLinear || n->kind() == kAddmm) candidates.push_back(n);
  }
  LinearRewrite done;
  for (Node* n : candidates) {
    const std::optional<c10::Symbol> kind = replace(*graph, n, path);
    if (kind) ++(*kind == kPackedLinear ? done.packed : done.onednn);
  }
  torch::jit::EliminateDeadCode(graph);
  return done;
}

}  // namespace corepool
