// The graph pass that gives engine.optimize = "onednn" its linear layers on
// prepacked weights: after freezing, aten::linear(x, W, b) and
// aten::addmm(b, x, W^T) (the form a scripted `x @ W.t() + b` freezes to,
// beta = alpha = 1) with constant fp32 weights become calls on oneDNN's inner
// product (corepool::onednn_linear, onednn_linear.h) where oneDNN has a
// brgemm kernel (AVX-512), else on corepool's own kernel
// (corepool::packed_linear, packed_linear.h) where the CPU has AVX2 + FMA,
// else on oneDNN's jitted gemm; a ReLU that is their only user is fused. Must
// run inside the optimizer's WeightArena scope (the packed weights are made
// here). engine.kernels (kernel_path.h) may ask for one kernel whatever the
// CPU: corepool's, oneDNN's (onednn, portable), or none (torch). Called by
// optimize.cc.
#pragma once

#include <torch/script.h>

#include "worker/kernels/kernel_path.h"

namespace corepool {

// How many layers now run on prepacked weights, by kernel.
struct LinearRewrite {
  int onednn = 0;  // corepool::onednn_linear
  int packed = 0;  // corepool::packed_linear (corepool's AVX2 kernel)
  int total() const { return onednn + packed; }
};

// Rewrites the forward() of a frozen module in place. A layer no kernel here
// takes stays as it is.
LinearRewrite rewrite_linear(torch::jit::Module& frozen, KernelPath path = KernelPath::kAuto);

}  // namespace corepool
