// Infer requests for the default model in tests that talk to a real
// `corepool serve` over HttpClient: deterministic inputs, the binary-tensor
// request (Triton's extension) and the scores of an answer. Header-only.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace corepool::testing {

constexpr int kItemFloats = 64 * 101;  // the default model's [1, 64, 101] log-mel item

// Deterministic model input `i`: values in [-4, 4], different for every i.
inline std::vector<float> input_item(int i) {
  std::vector<float> v(kItemFloats);
  uint32_t x = 2654435761u * static_cast<uint32_t>(i + 1);
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>((x >> 8) * (8.0 / 16777216.0) - 4.0);
  }
  return v;
}

// A binary-tensor infer request (Triton's extension): JSON header + raw FP32.
// `items` holds `batch` items back to back. Returns the body and the header
// line that goes with it.
inline std::pair<std::string, std::string> infer_request(const std::string& id, const std::vector<float>& item,
                                                         int batch = 1) {
  nlohmann::json header = {
      {"id", id},
      {"inputs", {{{"name", "input"}, {"datatype", "FP32"}, {"shape", {batch, 1, 64, 101}},
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
