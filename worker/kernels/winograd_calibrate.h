// Sets how many items each Winograd convolution of an optimized module hands
// oneDNN per call (WinogradConv::set_chunk), measured inside whole forwards so
// that every layer sees the cache state it sees in service. Called once by the
// optimizer (optimize.cc) after the module passed its check, before any engine
// or worker exists; runs forwards in the calling thread.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/script.h>

#include "worker/kernels/winograd_conv.h"

namespace corepool {

// The module's Winograd layers, in graph order.
std::vector<c10::intrusive_ptr<WinogradConv>> winograd_layers_of(torch::jit::Module& module);

// For each chunk size 1, 2, 4, ... up to the items of `batch`: every layer at
// that size, one forward to warm (new primitives, scratchpads), one timed with
// each layer's own clock; then each layer keeps its cheapest size per item (a
// larger one must win by 3 %: noise then picks less latency). Returns the
// chosen sizes in graph order (empty: no Winograd layer).
// `layers` are the module's (winograd_layers_of).
std::vector<int64_t> calibrate_winograd_chunks(torch::jit::Module& module,
                                               const std::vector<c10::intrusive_ptr<WinogradConv>>& layers,
                                               const at::Tensor& batch);

}  // namespace corepool
