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
  std::string optimized = "none";      // what optimize_model() applied: none | onednn | onednn-direct | bf16 | frozen
  at::ScalarType input_dtype = at::kFloat;  // bf16 modules take bf16 input
  // A stateful model's method frozen alone (optimize_model): `module` IS the
  // method to call, not the module that holds it at [stateful] method.
  bool method_is_module = false;
};

// The model's module. A jit::Module is a handle: copies share the weights, and
// rebinding a parameter through any copy (shared_weights.cc) changes them all.
// Defined in model.cc, which sees both halves.
struct LoadedModel;
torch::jit::Module& module_of(const LoadedModel& model);
TorchModule& torch_of(const LoadedModel& model);

// A stateful model's method ([stateful] method in model.toml): the submodule at dotted `path` ("_model", "a.b") of `module`, or `module`
// itself for "". Throws ModelError naming model.pt when a step is missing,
// is not a submodule, or the result has no forward().
torch::jit::Module stateful_method(const torch::jit::Module& module, const std::string& path, const std::string& dir);

}  // namespace corepool
