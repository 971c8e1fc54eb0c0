// Per-layer chunk sizes for the Winograd convolutions (winograd_calibrate.h).
#include "worker/kernels/winograd_calibrate.h"

#include <limits>

#include <torch/csrc/jit/ir/ir.h>
#include <torch/custom_class.h>

#include "worker/host/engine_arena.h"
#include "worker/kernels/winograd_conv.h"

namespace corepool {

std::vector<c10::intrusive_ptr<WinogradConv>> winograd_layers_of(torch::jit::Module& module) {
  std::vector<c10::intrusive_ptr<WinogradConv>> out;
  for (torch::jit::Node* n : module.get_method("forward").graph()->nodes()) {
    if (n->kind() != c10::prim::Constant || n->outputs().size() != 1) continue;
    const auto value = torch::jit::toIValue(n->output());
    if (!value || !value->isCustomClass()) continue;
    if (value->type() != c10::getCustomClassType<c10::intrusive_ptr<WinogradConv>>()) continue;
    out.push_back(value->toCustomClass<WinogradConv>());
  }
  return out;
}

std::vector<int64_t> calibrate_winograd_chunks(torch::jit::Module& module,
                                               const std::vector<c10::intrusive_ptr<WinogradConv>>& layers,
                                               const at::Tensor& batch) {
  if (layers.empty()) return {};
  c10::InferenceMode guard;
  const EngineArena arena;  // timed as an engine thread allocates (engine_arena.h)
  const int64_t items = std::min<int64_t>(batch.size(0), WinogradConv::kMaxChunk);
  std::vector<int64_t> chosen(layers.size(), 1);
  std::vector<double> best(layers.size(), std::numeric_limits<double>::infinity());
  for (int64_t chunk = 1; chunk <= items; chunk *= 2) {
    for (auto& l : layers) l->set_chunk(chunk);
    module.forward({batch});
    for (auto& l : layers) l->set_probe(true);
    module.forward({batch});
    for (size_t i = 0; i < layers.size(); ++i) {
      const double per_item = layers[i]->probe_seconds_per_item();
      layers[i]->set_probe(false);
      if (per_item < best[i] * 0.97) {
        best[i] = per_item;
        chosen[i] = chunk;
      }
    }
  }
  for (size_t i = 0; i < layers.size(); ++i) layers[i]->set_chunk(chosen[i]);
  return chosen;
}

}  // namespace corepool
