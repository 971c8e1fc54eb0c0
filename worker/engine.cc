// Inference proper: InferenceMode around every forward (no autograd records,
// no version counters), outputs converted to contiguous float scores.
#include "worker/engine.h"

#include <string>

namespace corepool {
namespace {

std::string shape_text(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

}  // namespace

Engine::Engine(std::shared_ptr<const LoadedModel> model)
    : model_(std::move(model)), module_(model_->module), features_(model_->config) {}

torch::Tensor Engine::forward(const torch::Tensor& input) {
  c10::InferenceMode guard;
  torch::jit::IValue out = module_.forward({input});
  if (!out.isTensor()) {
    throw ModelError(model_->dir + "/model.pt: forward() must return a Tensor, returned " +
                     out.tagKind());
  }
  return out.toTensor();
}

std::vector<std::vector<float>> Engine::infer(const std::vector<const float*>& segments) {
  c10::InferenceMode guard;
  torch::Tensor scores = forward(features_.compute(segments)).to(torch::kFloat32).contiguous();
  const int64_t batch = static_cast<int64_t>(segments.size());
  const int64_t labels = static_cast<int64_t>(model_->config.labels.size());
  if (scores.dim() != 2 || scores.size(0) != batch || scores.size(1) != labels) {
    throw ModelError(model_->dir + "/model.pt: output shape " + shape_text(scores) +
                     " does not match [" + std::to_string(batch) + ", " + std::to_string(labels) +
                     "] (batch, labels in model.toml)");
  }
  std::vector<std::vector<float>> out(batch);
  const float* p = scores.data_ptr<float>();
  for (int64_t i = 0; i < batch; ++i) out[i].assign(p + i * labels, p + (i + 1) * labels);
  return out;
}

void Engine::check_output_shape() {
  std::vector<float> silence(model_->config.segment_samples(), 0.0f);
  try {
    infer({silence.data()});
  } catch (const c10::Error& e) {
    throw ModelError(model_->dir + "/model.pt: forward() fails on a silent segment: " +
                     e.what_without_backtrace());
  }
}

}  // namespace corepool
