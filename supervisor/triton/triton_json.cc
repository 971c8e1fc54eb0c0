// The ModelConfig fields a Triton client reads before it sends anything
// (perf_analyzer: max_batch_size, inputs, outputs) come first; every other
// field is one Triton itself would fill for a CPU-only PyTorch model.
#include "supervisor/triton/triton_json.h"

#include <nlohmann/json.hpp>

#include "supervisor/triton/inference_protocol.h"

namespace corepool::triton {
namespace {

using json = nlohmann::json;

json parameter(const std::string& value) { return {{"string_value", value}}; }

}  // namespace

std::string model_config_json(const ModelConfig& model, const ServingFacts& facts) {
  json parameters = {{"mode", parameter(facts.mode)},
                     {"optimize", parameter(facts.optimize)},
                     {"labels", parameter(json(model.labels).dump())}};
  json batching = {{"max_queue_delay_microseconds", facts.max_queue_delay_us}};
  if (facts.engine_batch > 0) batching["preferred_batch_size"] = {facts.engine_batch};
  return json{{"name", model.name},
              {"platform", "pytorch_libtorch"},
              {"backend", "pytorch"},
              {"max_batch_size", facts.max_batch},
              {"input", {{{"name", oip::kInputName}, {"data_type", "TYPE_FP32"}, {"dims", model.item_shape()}}}},
              {"output",
               {{{"name", oip::kOutputName},
                 {"data_type", "TYPE_FP32"},
                 {"dims", {static_cast<int64_t>(model.labels.size())}}}}},
              {"instance_group", {{{"name", model.name}, {"kind", "KIND_CPU"}, {"count", facts.workers}}}},
              {"dynamic_batching", std::move(batching)},
              {"parameters", std::move(parameters)}}
      .dump();
}

std::string repository_entry_json(const std::string& name, const std::string& version, bool ready,
                                  const std::string& reason) {
  return json{{"name", name}, {"version", version}, {"state", ready ? "READY" : "UNAVAILABLE"}, {"reason", reason}}
      .dump();
}

}  // namespace corepool::triton
