// The default tagger's network, as a TorchScript module our C++ code can both
// train and save: the log-mel segment halved in both axes, three 3x3 convolution blocks,
// max + mean pooling over time, one linear layer, softmax over the labels.
// Written in TorchScript (Module::define) so that the trained module is saved
// as it is, with no Python. Used by corepool-train-tagger only.
#pragma once

#include <torch/script.h>

namespace corepool::train {

struct NetShape {
  int64_t n_mels = 64;
  int64_t labels = 4;
  std::vector<int64_t> channels = {16, 32, 48};
};

// A module with methods logits(x) (training) and forward(x) = softmax(logits(x)),
// x: [B, 1, n_mels, frames]. Weights are He-initialised from the global RNG;
// `mean` and `std` standardise the log-mel input (stored as buffers).
torch::jit::Module make_tagger(const NetShape& shape, double mean, double std);

// One module averaging the softmax outputs of `members` (make_tagger's
// networks, all of one shape, each trained with its own seed): forward(x)
// only, its tensors named m0_..., m1_..., ... Throws std::invalid_argument if
// the members differ.
torch::jit::Module make_ensemble(const std::vector<torch::jit::Module>& members);

// Every parameter of the module, in a stable order (for the optimiser).
std::vector<torch::Tensor> trainable(const torch::jit::Module& module);

}  // namespace corepool::train
