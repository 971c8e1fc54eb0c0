// Loading a model directory (model.pt + model.toml) into memory, once per
// process. The LoadedModel is shared read-only by every engine thread. This
// header is free of LibTorch: the module sits behind TorchModule, which only
// code that runs LibTorch sees (worker/model/torch_module.h).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "config/model_config.h"

namespace corepool {

// A model directory that cannot be served; the message names the file and why.
struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The TorchScript module; defined in worker/model/torch_module.h.
struct TorchModule;

struct LoadedModel {
  std::string dir;
  ModelConfig config;
  std::shared_ptr<TorchModule> torch;  // never null after load_model
  size_t weight_bytes = 0;             // parameters + buffers
};

// Throws ModelError: missing directory, missing/unreadable model.pt, a file that
// is not TorchScript, a model.toml that fails validation (ConfigError text).
std::shared_ptr<const LoadedModel> load_model(const std::string& dir);

}  // namespace corepool
