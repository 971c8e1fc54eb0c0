// Infer requests for the default model in tests that talk to a real
// `corepool serve` over HttpClient: deterministic inputs, the binary-tensor
// request (Triton's extension) and the scores of an answer. Header-only.
// Shapes come from models/default/model.toml, so the tests follow the default
// model when its segment length changes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/model_config.h"

namespace corepool::testing {

// The default model's contract, read once.
inline const ModelConfig& default_model_config() {
  static const ModelConfig config = load_model_config(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml");
  return config;
}

// Floats in one item of a model's input ([1, n_mels, frames]).
inline int item_floats(const ModelConfig& model = default_model_config()) {
  return static_cast<int>(model.item_floats());
}

// A request's input shape for `batch` items: [batch, 1, n_mels, frames].
inline nlohmann::json input_shape(int64_t batch, const ModelConfig& model = default_model_config()) {
  nlohmann::json shape = {batch};
  for (int64_t d : model.item_shape()) shape.push_back(d);
  return shape;
}

// Deterministic model input `i`: values in [-4, 4], different for every i.
inline std::vector<float> input_item(int i, const ModelConfig& model = default_model_config()) {
  std::vector<float> v(static_cast<size_t>(item_floats(model)));
  uint32_t x = 2654435761u * static_cast<uint32_t>(i + 1);
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>((x >> 8) * (8.0 / 16777216.0) - 4.0);
  }
  return v;
}

// A binary-tensor infer request (Triton's extension): JSON header + raw FP32.
// `items` holds `batch` items back to back, shaped for `model`. Returns the
// body and the header line that goes with it.
inline std::pair<std::string, std::string> infer_request(const std::string& id, const std::vector<float>& item,
                                                         int batch = 1,
                                                         const ModelConfig& model = default_model_config()) {
  nlohmann::json header = {
      {"id", id},
      {"inputs", {{{"name", "input"}, {"datatype", "FP32"}, {"shape", input_shape(batch, model)},
                   {"parameters", {{"binary_data_size", item.size() * sizeof(float)}}}}}}};
  const std::string text = header.dump();
  std::string body = text;
  body.append(reinterpret_cast<const char*>(item.data()), item.size() * sizeof(float));
  return {body, "Inference-Header-Content-Length: " + std::to_string(text.size()) + "\r\n"};
}

inline std::vector<float> scores_of(const std::string& body) {
  return nlohmann::json::parse(body)["outputs"][0]["data"].get<std::vector<float>>();
}

}  // namespace corepool::testing
