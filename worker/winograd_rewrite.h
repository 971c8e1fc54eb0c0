// The graph pass behind engine.optimize = "onednn": after freezing, every 3x3
// convolution that oneDNN can run as Winograd (stride 1, padding 1, one group,
// channels in multiples of 16, constant fp32 weights) becomes a
// corepool::winograd_conv3x3 call (winograd_conv.h), its ReLU fused; so does
// one whose input channels do not fill a block (the first layer: oneDNN's
// direct kernel from plain input, so that the chain starts blocked); and the
// pooling between such convolutions runs on the blocked layout, so activations
// are converted only where the chain starts and ends. Called by optimize.cc.
#pragma once

#include <torch/script.h>

namespace corepool {

struct WinogradRewrite {
  int winograd = 0;  // convolutions now run as Winograd
  int direct = 0;    // convolutions from plain input now run direct into the blocked layout
};

// Rewrites the forward() of a frozen module in place (nothing changes when no
// convolution can run as Winograd).
WinogradRewrite rewrite_winograd(torch::jit::Module& frozen);

}  // namespace corepool
