// "[2, 1, 128]": a tensor's shape as the engine's error messages write it.
#pragma once

#include <string>

#include <torch/script.h>

namespace corepool {

inline std::string shape_text(at::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

inline std::string shape_text(const torch::Tensor& t) { return shape_text(t.sizes()); }

}  // namespace corepool
