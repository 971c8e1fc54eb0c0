// A stateful model's split ([stateful.split] in model.toml, SplitSpec): its
// front and sequence methods, defined on the method's module from the
// model.toml's TorchScript source when it gives one, and found there.
#pragma once

#include <string>

#include <torch/script.h>

#include "config/model_config.h"

namespace corepool {

// Defines split.source (if any) on `method_module` and checks that both
// methods exist. Throws ModelError naming model.toml or model.pt and why.
// Compiles only: runs no op, so the supervisor may call it before it forks.
void define_split_methods(torch::jit::Module& method_module, const StatefulSpec& spec, const std::string& dir);

}  // namespace corepool
