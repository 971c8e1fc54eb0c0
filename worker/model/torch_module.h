// The LibTorch side of a LoadedModel: the torch::jit::Module itself, and what
// optimize_model() made of it. Included only by code that runs LibTorch (the
// engine, shared weights, bench ceilings, tests); everything else sees
// LoadedModel through the torch-free model.h.
#pragma once

#include <memory>
#include <string>

#include <torch/script.h>

#include "worker/model/weight_arena.h"

namespace corepool {

struct TorchModule {
  // Declared first, destroyed last: the module's tensors may live in it.
  std::shared_ptr<WeightArena> arena;  // process mode's optimized weights; null otherwise
  torch::jit::Module module;           // eval()'d; parameters never require grad
  std::string optimized = "none";      // what optimize_model() applied: none | onednn | bf16
  at::ScalarType input_dtype = at::kFloat;  // bf16 modules take bf16 input
};

// The model's module. A jit::Module is a handle: copies share the weights, and
// rebinding a parameter through any copy (shared_weights.cc) changes them all.
// Defined in model.cc, which sees both halves.
struct LoadedModel;
torch::jit::Module& module_of(const LoadedModel& model);
TorchModule& torch_of(const LoadedModel& model);

}  // namespace corepool
