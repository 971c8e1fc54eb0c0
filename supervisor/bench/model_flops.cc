// The legacy profiler is the one of LibTorch 1.13 that attaches FLOP counts
// to events in C++ (ProfilerConfig's with_flops, which needs input shapes).
#include "supervisor/bench/model_flops.h"

#include <stdexcept>

#include <torch/csrc/autograd/profiler_legacy.h>

#include "worker/model/torch_module.h"

namespace corepool {

double count_flop_per_segment(const LoadedModel& model) {
  torch::jit::Module module = module_of(model);
  std::vector<int64_t> shape{1};
  for (int64_t d : model.config.item_shape()) shape.push_back(d);
  torch::NoGradGuard no_grad;
  const at::Tensor input = torch::zeros(shape);
  namespace prof = torch::profiler::impl;
  const prof::ProfilerConfig config(prof::ProfilerState::CPU, /*report_input_shapes=*/true, /*profile_memory=*/false,
                                    /*with_stack=*/false, /*with_flops=*/true);
  torch::autograd::profiler::enableProfilerLegacy(config);
  try {
    module.forward({input});
  } catch (...) {
    torch::autograd::profiler::disableProfilerLegacy();
    throw;
  }
  double flop = 0;
  for (auto& thread_events : torch::autograd::profiler::disableProfilerLegacy()) {
    for (auto& event : thread_events) flop += static_cast<double>(event.flops());
  }
  if (flop <= 0) throw std::runtime_error("LibTorch's profiler counted no floating-point operations in forward()");
  return flop;
}

}  // namespace corepool
