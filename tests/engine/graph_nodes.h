// How many top-level nodes of one kind a module's forward() has: what the
// graph-pass tests (winograd_test.cc, onednn_linear_test.cc) count.
#pragma once

#include <string>

#include <torch/script.h>

namespace corepool::testing {

inline int count_nodes(torch::jit::Module& m, const char* kind) {
  int n = 0;
  for (auto* node : m.get_method("forward").graph()->nodes()) n += node->kind().toQualString() == std::string(kind);
  return n;
}

}  // namespace corepool::testing
