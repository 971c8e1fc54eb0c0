// Triton's model configuration and repository index as JSON, for corepool's
// one-input, one-output models: pure functions, no LibTorch, unit-tested.
// The text is protobuf's JSON mapping of model_config.proto's ModelConfig and
// grpc_service.proto's RepositoryIndexResponse.ModelIndex (original field
// names, enums by name), so JsonStringToMessage reads it. Called by ServeService.
#pragma once

#include <cstdint>
#include <string>

#include "config/model_config.h"

namespace corepool::triton {

// What the model's configuration says beyond model.toml: how it is served now.
struct ServingFacts {
  int64_t max_batch = 0;       // the batch bound a request may use (max_batch_size)
  int workers = 0;             // instance_group count
  int engine_batch = 0;        // segments per forward() (preferred_batch_size)
  int max_queue_delay_us = 0;  // engine.max_batch_delay_us
  std::string mode;            // "thread" | "process"
  std::string optimize;        // engine.optimize as applied
};

// ModelConfig: name, platform "pytorch_libtorch", backend "pytorch",
// max_batch_size, input/output (TYPE_FP32, dims without the batch dimension),
// instance_group [{KIND_CPU, count}], dynamic_batching, parameters (mode,
// optimize, labels as a JSON array text) as {"string_value": ...}.
std::string model_config_json(const ModelConfig& model, const ServingFacts& facts);

// One entry of the repository index: {"name","version","state","reason"}.
// state is "READY" or "UNAVAILABLE" (then `reason` says why).
std::string repository_entry_json(const std::string& name, const std::string& version, bool ready,
                                  const std::string& reason);

}  // namespace corepool::triton
