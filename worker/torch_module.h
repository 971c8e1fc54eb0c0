// The LibTorch side of a LoadedModel: the torch::jit::Module itself. Included
// only by code that runs LibTorch (the engine, shared weights, bench ceilings,
// tests); everything else sees LoadedModel through the torch-free model.h.
#pragma once

#include <torch/script.h>

namespace corepool {

struct TorchModule {
  torch::jit::Module module;  // eval()'d; parameters never require grad
};

// The model's module. A jit::Module is a handle: copies share the weights, and
// rebinding a parameter through any copy (shared_weights.cc) changes them all.
// Defined in model.cc, which sees both halves.
struct LoadedModel;
torch::jit::Module& module_of(const LoadedModel& model);

}  // namespace corepool
