// Stage 3 of the pipeline, plus the feature step that feeds it: one Engine per
// engine thread (or per worker process). Engines made from the same LoadedModel
// share one set of weights: the module handle is copied, the tensors are not.
#pragma once

#include <memory>
#include <vector>

#include "worker/features.h"
#include "worker/model.h"

namespace corepool {

class Engine {
 public:
  explicit Engine(std::shared_ptr<const LoadedModel> model);

  // Features + forward() for a batch of PCM segments (segment_samples() floats
  // each); returns one score vector per segment (labels.size() values).
  // Throws c10::Error / ModelError on a failed forward or a wrongly shaped output.
  std::vector<std::vector<float>> infer(const std::vector<const float*>& segments);

  // forward() alone on a ready input tensor: what the bare ceiling measures.
  torch::Tensor forward(const torch::Tensor& input);
  torch::Tensor features(const std::vector<const float*>& segments) const {
    return features_.compute(segments);
  }

  // Runs one silent segment and checks the output's shape against model.toml.
  // Throws ModelError naming model.pt and the shapes.
  void check_output_shape();

  const LoadedModel& model() const { return *model_; }

 private:
  std::shared_ptr<const LoadedModel> model_;
  torch::jit::Module module_;  // handle copy: shares parameters with model_->module
  FeatureExtractor features_;
};

}  // namespace corepool
