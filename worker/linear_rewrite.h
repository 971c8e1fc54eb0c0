// The graph pass that gives engine.optimize = "onednn" and "onednn-direct"
// their linear layers on oneDNN's prepacked inner product (onednn_linear.h):
// after freezing, aten::linear(x, W, b) and aten::addmm(b, x, W^T) (the form
// a scripted `x @ W.t() + b` freezes to, beta = alpha = 1) with constant fp32
// weights become corepool::onednn_linear calls, a ReLU that is their only
// user fused. Must run inside the optimizer's WeightArena scope (the packed
// weights are made here). Called by optimize.cc.
#pragma once

#include <torch/script.h>

namespace corepool {

// Rewrites the forward() of a frozen module in place; returns how many layers
// now run on oneDNN. A layer oneDNN has no jitted kernel for stays as it is.
int rewrite_linear(torch::jit::Module& frozen);

}  // namespace corepool
