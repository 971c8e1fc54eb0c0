// Stage 3 of the pipeline, plus the feature step that feeds it: one Engine per
// engine thread (or per worker process). Engines made from the same LoadedModel
// share one set of weights: the module handle is copied, the tensors are not.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "worker/executor.h"
#include "worker/features.h"
#include "worker/model/model.h"
#include "worker/model/torch_module.h"

namespace corepool {

// One item of a batch that may mix kinds: PCM for the feature step, or one
// item of the model's input (ModelConfig::item_floats() floats). For a
// stateful model both kinds are the same: context + chunk samples, then the
// stream's state (ModelConfig::task_floats()), and a result is the scores
// followed by the new state (ModelConfig::result_floats()). The floats
// must outlive the infer_items() call; they are read, never written.
struct BatchItem {
  const float* data = nullptr;
  TaskInput input = TaskInput::kPcm;
  size_t floats = 0;  // how many: what a split sequence's T is read from (the others' size is fixed)
};

// Where one infer_items() call spent its time, in nanoseconds (Triton's
// statistics: compute_input, compute_infer, compute_output).
struct EngineTiming {
  uint64_t input_ns = 0;   // features and the copy into the batch tensor
  uint64_t infer_ns = 0;   // forward()
  uint64_t output_ns = 0;  // the scores out of the output tensor
};

// "" if `floats` is the right size for an item of kind `input`, else the error
// text a task of that size is answered with. Both executors check with this
// before anything reads the floats.
std::string item_size_error(const ModelConfig& config, TaskInput input, size_t floats);

class Engine {
 public:
  explicit Engine(std::shared_ptr<const LoadedModel> model);

  // Features + forward() for a batch of PCM segments (segment_samples() floats
  // each); returns one score vector per segment (labels.size() values).
  // Throws c10::Error / ModelError on a failed forward or a wrongly shaped output.
  std::vector<std::vector<float>> infer(const std::vector<const float*>& segments);
  // The same for a batch that mixes kinds, still in one forward(): features
  // for the PCM items, the model-input items viewed in place, concatenated in
  // order. Scores come back in item order; `timing` (if given) says where
  // the time went.
  std::vector<std::vector<float>> infer_items(const std::vector<BatchItem>& items, EngineTiming* timing = nullptr);

  // forward() alone on a ready input tensor: what the bare ceiling measures.
  torch::Tensor forward(const torch::Tensor& input);
  torch::Tensor features(const std::vector<const float*>& segments) const {
    return features_.compute(segments);
  }

  // Runs one forward() of `batch` silent segments and checks the output's
  // shape against model.toml. Throws ModelError naming model.pt and the
  // shapes. At the engine's max_batch it is also the first half of
  // warm_up(): the first full batch of a cold engine thread ran about 25 ms
  // slower on CNN10 (batch 8; half of it its activations' first page
  // touches, half per-thread state that outlives a purge).
  void check_output_shape(int batch = 1);

  // How many forward()s a loop runs before its calls cost what they will:
  // the first pays for oneDNN's primitives and its activations' first page
  // touches, and the second still ran 8-10 ms slower on CNN10 at batch 8
  // (74-81 ms, then 69-73 from the third on). The engines warm up as the
  // bench's ceilings do, before any clock.
  static constexpr int kWarmupCalls = 2;
  // check_output_shape(batch), then more forward()s of `batch` silent
  // segments, kWarmupCalls in all. A split model instead checks on one chunk
  // and warms its front on `batch` chunks and its sequence (engine.cc).
  void warm_up(int batch);

  // A split stateful model ([stateful.split], worker/split_infer.cc). The
  // front of x [N, context + chunk] -> [N, feature_floats]. The sequence of
  // streams' `chunks` consecutive chunks, in one call: each item is a
  // stream's chunks x feature_floats features then its state
  // (state_floats()); each result its chunks x labels scores, then its new
  // state. split_sequence() is the same for one stream whose features and
  // state lie apart. ModelError for a wrong shape.
  torch::Tensor split_front(const torch::Tensor& x);
  std::vector<std::vector<float>> split_sequences(const std::vector<const float*>& items, int64_t chunks);
  std::vector<float> split_sequence(const float* features, int64_t chunks, const float* state);
  // Runs both on two streams of six random chunks against the method chunk
  // by chunk; ModelError naming model.toml when scores or states differ by
  // more than kSplitTolerance. A no-op for a model without a split.
  void check_split();
  static constexpr double kSplitTolerance = 1e-4;

  const LoadedModel& model() const { return *model_; }

 private:
  void warm_up_split(int batch);  // warm_up() of a split model
  torch::Tensor batch_input(const std::vector<BatchItem>& items) const;
  // check_output_shape() on segments the caller holds.
  void check_output_shape_on(const std::vector<const float*>& segments);
  std::vector<std::vector<float>> scores_of(const torch::Tensor& input, int64_t batch, EngineTiming* timing = nullptr);
  // A stateful model's batch (worker/stateful_batch.cc): gathers each item's
  // samples and state, calls the method once, scatters scores and new states.
  std::vector<std::vector<float>> stateful_infer(const std::vector<BatchItem>& items, EngineTiming* timing);
  // A split model's batch (worker/split_infer.cc), whose items may mix the
  // method's chunks, split fronts and split sequences: one call per kind
  // present (the fronts together, the sequences of each length together).
  std::vector<std::vector<float>> split_items(const std::vector<BatchItem>& items, EngineTiming* timing);

  std::shared_ptr<const LoadedModel> model_;
  torch::jit::Module module_;  // handle copy: shares parameters with model_->module
  torch::jit::Module method_;  // stateful: the submodule whose forward runs (module_ itself for "")
  at::ScalarType input_dtype_;  // what module_ takes (torch_module.h)
  FeatureExtractor features_;
};

}  // namespace corepool
