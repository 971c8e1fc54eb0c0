// The graph pass behind engine.optimize = "onednn": after freezing, every 3x3
// convolution that oneDNN can run as Winograd (stride 1, padding 1, one group,
// channels in multiples of 16, constant fp32 weights) becomes a
// corepool::winograd_conv3x3 call (winograd_conv.h), its ReLU fused, and the
// pooling between such convolutions runs on the blocked layout, so activations
// are converted only where the chain starts and ends. Called by optimize.cc.
#pragma once

#include <torch/script.h>

namespace corepool {

// Rewrites the forward() of a frozen module in place; returns how many
// convolutions now run as Winograd (0: the module is unchanged).
int rewrite_winograd(torch::jit::Module& frozen);

}  // namespace corepool
