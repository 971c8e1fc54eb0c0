#include "worker/model/split_methods.h"

#include "worker/kernels/lstm_sequence.h"
#include "worker/model/model.h"
#include "worker/model/ops_resolver.h"

namespace corepool {

void define_split_methods(torch::jit::Module& method_module, const StatefulSpec& spec, const std::string& dir) {
  const SplitSpec& split = spec.split;
  if (!split.enabled()) return;
  // The source may call torch.ops.corepool.lstm: its object file must be linked.
  link_lstm_sequence_op();
  if (!split.source.empty()) {
    try {
      method_module.define(split.source, ops_resolver());
    } catch (const c10::Error& e) {
      throw ModelError(dir + "/model.toml: [stateful.split] source does not compile: " + e.what_without_backtrace());
    } catch (const std::exception& e) {  // torch::jit::ErrorReport: the source's line and what is wrong there
      throw ModelError(dir + "/model.toml: [stateful.split] source does not compile: " + e.what());
    }
  }
  for (const std::string& name : {split.front, split.sequence}) {
    if (!method_module.find_method(name)) {
      throw ModelError(dir + "/model.pt: [stateful] method \"" + spec.method + "\" has no method " + name +
                       " ([stateful.split]; define it in model.pt or in the split's source)");
    }
  }
}

}  // namespace corepool
