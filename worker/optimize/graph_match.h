// Small matchers the graph passes share (winograd_rewrite.cc, linear_rewrite.cc).
#pragma once

#include <string>

#include <torch/csrc/jit/ir/ir.h>

namespace corepool {

// The ReLU that is the only use of `v`, if any: a pass can fuse it.
inline torch::jit::Node* sole_relu(torch::jit::Value* v) {
  if (v->uses().size() != 1) return nullptr;
  torch::jit::Node* user = v->uses()[0].user;
  const std::string kind = user->kind().toQualString();
  return kind == "aten::relu" || kind == "aten::relu_" ? user : nullptr;
}

}  // namespace corepool
