// The graph pass that gives engine.optimize = "onednn" its linear layers on
// prepacked weights: after freezing, aten::linear(x, W, b) and
// aten::addmm(b, x, W^T) (the form a scripted `x @ W.t() + b` freezes to,
// beta = alpha = 1) with constant fp32 weights become calls on oneDNN's inner
// product (corepool::onednn_linear, onednn_linear.h) where oneDNN has a
// brgemm kernel (AVX-512), else on corepool's own kernel
// (corepool::packed_linear, packed_linear.h) where the CPU has AVX2 + FMA,
// else on oneDNN's jitted gemm; a ReLU that is their only user is fused. Must
// run inside the optimizer's WeightArena scope (the packed weights are made
// here). Called by optimize.cc.
#pragma once

#include <torch/script.h>

namespace corepool {

// Rewrites the forward() of a frozen module in place; returns how many layers
// now run on prepacked weights. A layer no kernel here takes stays as it is.
int rewrite_linear(torch::jit::Module& frozen);

}  // namespace corepool
