// The stateful model kind's half of the engine: finding the method to call,
// and gathering / scattering the states that travel inside tasks. Used only by
// Engine (engine.cc); Engine::stateful_infer() is defined in stateful_batch.cc.
#pragma once

#include <string>

#include <torch/script.h>

namespace corepool {

// The submodule at dotted `path` ("_model", "a.b") of `module`, or `module`
// itself for "". Throws ModelError naming model.pt when a step is missing,
// is not a submodule, or the result has no forward().
torch::jit::Module stateful_method(const torch::jit::Module& module, const std::string& path, const std::string& dir);

}  // namespace corepool
