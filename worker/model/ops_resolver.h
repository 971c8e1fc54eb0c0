// The resolver TorchScript source compiled in C++ needs to call registered
// operators: LibTorch 1.13's own (torch::jit::compile, Module::define without
// a resolver) knows `torch` only as the aten namespace, and
// torch.ops.corepool.lstm fails there with "attribute lookup is not defined
// on builtin". This one adds torch.ops.<namespace>, as the Python frontend
// and torch::jit::load have it. Used for a split's source (split_methods.cc).
#pragma once

#include <memory>

#include <torch/script.h>

namespace corepool {

std::shared_ptr<torch::jit::Resolver> ops_resolver();

}  // namespace corepool
