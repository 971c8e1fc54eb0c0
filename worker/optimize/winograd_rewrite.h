// The graph pass behind engine.optimize = "onednn": after freezing, every 3x3
// convolution that oneDNN can run as Winograd (stride 1, padding 1, one group,
// channels in multiples of 16, constant fp32 weights) becomes a
// corepool::winograd_conv3x3 call (winograd_conv.h), its ReLU fused; so does
// one whose input channels do not fill a block (the first layer: oneDNN's
// direct kernel from plain input, so that the chain starts blocked); and the
// pooling between such convolutions runs on the blocked layout, so activations
// are converted only where the chain starts and ends. On a CPU whose oneDNN
// has no Winograd kernel (no AVX-512), every such convolution with at least
// 16 input channels runs as corepool's own Winograd F(4x4, 3x3) on plain NCHW
// instead (winograd_f43.h). engine.kernels (kernel_path.h) may ask for one
// path whatever the CPU: onednn (the oneDNN chain only), corepool or portable
// (the own kernel's AVX2 or portable version only), torch (no rewrite).
// Called by optimize.cc.
#pragma once

#include <torch/script.h>

#include "worker/kernels/kernel_path.h"

namespace corepool {

struct WinogradRewrite {
  int winograd = 0;  // convolutions now run as Winograd
  int direct = 0;    // convolutions from plain input now run direct into the blocked layout
  int own = 0;       // convolutions now run as corepool's own Winograd (no oneDNN Winograd here)
  int own_pooled = 0;  // ... of which with the 2x2 average pool after them fused
  int own_portable = 0;  // ... of which on the portable transforms or oneDNN's sgemm (not corepool's AVX2 path)
};

// Rewrites the forward() of a frozen module in place (nothing changes when no
// convolution can run as Winograd).
WinogradRewrite rewrite_winograd(torch::jit::Module& frozen, KernelPath path = KernelPath::kAuto);

// The own-kernel half alone, whatever the CPU: every 3x3 convolution with at
// least WinogradF43::kMinInChannels input channels becomes a
// corepool::winograd_f43 call, its ReLU fused; with `portable`, on the
// kernel's portable version (WinogradF43::Options::portable). rewrite_winograd
// calls it where oneDNN has no Winograd kernel.
WinogradRewrite rewrite_own_winograd(torch::jit::Module& frozen, bool portable = false);

}  // namespace corepool
