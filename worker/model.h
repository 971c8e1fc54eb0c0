// Loading a model directory (model.pt + model.toml) into memory, once per
// process. The LoadedModel is shared read-only by every engine thread; its
// torch::jit::Module handle may be copied freely (copies share the weights).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include <torch/script.h>

#include "config/model_config.h"

namespace corepool {

// A model directory that cannot be served; the message names the file and why.
struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct LoadedModel {
  std::string dir;
  ModelConfig config;
  torch::jit::Module module;  // eval()'d; parameters never require grad
  size_t weight_bytes = 0;    // parameters + buffers
};

// Throws ModelError: missing directory, missing/unreadable model.pt, a file that
// is not TorchScript, a model.toml that fails validation (ConfigError text).
std::shared_ptr<const LoadedModel> load_model(const std::string& dir);

}  // namespace corepool
