// Inference proper: InferenceMode around every forward (no autograd records,
// no version counters), outputs converted to contiguous float scores.
#include "worker/engine.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "worker/model/torch_module.h"  // stateful_method()
#include "worker/shape_text.h"

namespace corepool {
namespace {

uint64_t ns_since(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

// `batch` (at least 1) segments of silence, all pointing at one buffer.
struct SilentBatch {
  std::vector<float> samples;
  std::vector<const float*> segments;
  SilentBatch(int64_t segment_samples, int batch)
      : samples(static_cast<size_t>(segment_samples), 0.0f),
        segments(static_cast<size_t>(std::max(batch, 1)), samples.data()) {}
  SilentBatch(const SilentBatch&) = delete;  // segments point into samples
  SilentBatch& operator=(const SilentBatch&) = delete;
};

// Runs f(): what LibTorch throws (an error, a TorchScript raise or assert)
// comes out as a ModelError that starts with `prefix`; a ModelError (a shape
// already named) as it is.
template <typename F>
void as_model_error(const std::string& prefix, F&& f) {
  try {
    f();
  } catch (const ModelError&) {
    throw;
  } catch (const c10::Error& e) {
    throw ModelError(prefix + e.what_without_backtrace());
  } catch (const std::exception& e) {  // torch::jit::JITException
    throw ModelError(prefix + e.what());
  }
}

}  // namespace

// The split's two kinds: only a model with a split takes them, and only at their sizes.
std::string split_size_error(const ModelConfig& config, TaskInput input, size_t floats) {
  const StatefulSpec& s = config.stateful;
  if (!config.is_stateful() || !s.split.enabled()) return "model has no [stateful.split]: no split task runs on it";
  if (input == TaskInput::kSplitFront) {
    const auto want = static_cast<size_t>(s.context_samples + s.chunk_samples);
    if (floats == want) return "";
    return "split front task has " + std::to_string(floats) + " floats, model expects " + std::to_string(want);
  }
  const auto state = static_cast<size_t>(s.state_floats()), width = static_cast<size_t>(s.split.feature_floats);
  const size_t chunks = floats > state ? (floats - state) / width : 0;
  if (floats > state && (floats - state) % width == 0 && chunks <= static_cast<size_t>(s.split.sequence_chunks)) {
    return "";
  }
  return "split sequence task has " + std::to_string(floats) + " floats, model expects T x " + std::to_string(width) +
         " features + " + std::to_string(state) + " state, 1 <= T <= " + std::to_string(s.split.sequence_chunks);
}

std::string item_size_error(const ModelConfig& config, TaskInput input, size_t floats) {
  if (input == TaskInput::kSplitFront || input == TaskInput::kSplitSequence) {
    return split_size_error(config, input, floats);
  }
  if (config.is_stateful()) {
    const auto& s = config.stateful;
    const size_t want = static_cast<size_t>(config.task_floats());
    if (floats == want) return "";
    return "stateful task has " + std::to_string(floats) + " floats, model expects " + std::to_string(want) +
           " (" + std::to_string(s.context_samples) + " context + " + std::to_string(s.chunk_samples) +
           " samples + " + std::to_string(s.state_floats()) + " state)";
  }
  if (input == TaskInput::kPcm) {
    const size_t want = static_cast<size_t>(config.segment_samples());
    if (floats == want) return "";
    return "segment has " + std::to_string(floats) + " samples, model expects " + std::to_string(want);
  }
  const size_t want = static_cast<size_t>(config.item_floats());
  if (floats == want) return "";
  std::string shape;
  for (const int64_t d : config.item_shape()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  return "model input has " + std::to_string(floats) + " floats, model expects " + std::to_string(want) +
         " (one item of shape [" + shape + "])";
}

Engine::Engine(std::shared_ptr<const LoadedModel> model)
    : model_(std::move(model)), module_(module_of(*model_)), input_dtype_(torch_of(*model_).input_dtype),
      features_(model_->config) {
  if (model_->config.is_stateful()) {
    method_ = torch_of(*model_).method_is_module ? module_
                                                 : stateful_method(module_, model_->config.stateful.method, model_->dir);
  }
}

torch::Tensor Engine::forward(const torch::Tensor& input) {
  c10::InferenceMode guard;
  // A bf16 module (engine.optimize = "bf16") takes bf16 input; scores_of() converts back.
  torch::jit::IValue out = module_.forward({input.scalar_type() == input_dtype_ ? input : input.to(input_dtype_)});
  if (!out.isTensor()) {
    throw ModelError(model_->dir + "/model.pt: forward() must return a Tensor, returned " +
                     out.tagKind());
  }
  return out.toTensor();
}

std::vector<std::vector<float>> Engine::infer(const std::vector<const float*>& segments) {
  c10::InferenceMode guard;
  if (model_->config.is_stateful()) {
    std::vector<BatchItem> items;
    for (const float* p : segments) items.push_back({p, TaskInput::kPcm});
    return stateful_infer(items, nullptr);
  }
  return scores_of(features_.compute(segments), static_cast<int64_t>(segments.size()));
}

std::vector<std::vector<float>> Engine::infer_items(const std::vector<BatchItem>& items, EngineTiming* timing) {
  c10::InferenceMode guard;
  if (model_->config.stateful.split.enabled()) return split_items(items, timing);
  if (model_->config.is_stateful()) return stateful_infer(items, timing);
  const auto t0 = std::chrono::steady_clock::now();
  torch::Tensor input = batch_input(items);
  if (timing) timing->input_ns = ns_since(t0);
  return scores_of(input, static_cast<int64_t>(items.size()), timing);
}

// The features of the PCM items are computed in one call (the STFT batches
// well); model-input items are zero-copy views until torch::cat copies every
// row once into the batch tensor, in item order.
torch::Tensor Engine::batch_input(const std::vector<BatchItem>& items) const {
  std::vector<const float*> pcm;
  for (const auto& item : items) {
    if (item.input == TaskInput::kPcm) pcm.push_back(item.data);
  }
  if (pcm.size() == items.size()) return features_.compute(pcm);  // the common case: no cat
  const torch::Tensor features = pcm.empty() ? torch::Tensor() : features_.compute(pcm);
  std::vector<int64_t> shape = model_->config.item_shape();
  shape.insert(shape.begin(), 1);
  std::vector<torch::Tensor> rows;
  rows.reserve(items.size());
  int64_t next_pcm = 0;
  for (const auto& item : items) {
    if (item.input == TaskInput::kPcm) {
      rows.push_back(features.narrow(0, next_pcm++, 1));
    } else {
      rows.push_back(torch::from_blob(const_cast<float*>(item.data), shape, torch::kFloat32));
    }
  }
  return torch::cat(rows, 0);
}

std::vector<std::vector<float>> Engine::scores_of(const torch::Tensor& input, int64_t batch, EngineTiming* timing) {
  auto t0 = std::chrono::steady_clock::now();
  torch::Tensor output = forward(input);
  if (timing) {
    timing->infer_ns = ns_since(t0);
    t0 = std::chrono::steady_clock::now();
  }
  torch::Tensor scores = output.to(torch::kFloat32).contiguous();
  const int64_t labels = static_cast<int64_t>(model_->config.labels.size());
  if (scores.dim() != 2 || scores.size(0) != batch || scores.size(1) != labels) {
    throw ModelError(model_->dir + "/model.pt: output shape " + shape_text(scores) +
                     " does not match [" + std::to_string(batch) + ", " + std::to_string(labels) +
                     "] (batch, labels in model.toml)");
  }
  std::vector<std::vector<float>> out(batch);
  const float* p = scores.data_ptr<float>();
  for (int64_t i = 0; i < batch; ++i) out[i].assign(p + i * labels, p + (i + 1) * labels);
  if (timing) timing->output_ns = ns_since(t0);
  return out;
}

void Engine::check_output_shape(int batch) {
  const SilentBatch silent(model_->config.task_floats(), batch);
  check_output_shape_on(silent.segments);
}

void Engine::check_output_shape_on(const std::vector<const float*>& segments) {
  const std::string what =
      segments.size() == 1 ? "a silent segment" : "a batch of " + std::to_string(segments.size()) + " silent segments";
  as_model_error(model_->dir + "/model.pt: forward() fails on " + what + ": ", [&] { infer(segments); });
  as_model_error(model_->dir + "/model.toml: [stateful.split] methods fail: ", [&] { check_split(); });
}

void Engine::warm_up(int batch) {
  if (model_->config.stateful.split.enabled()) {
    warm_up_split(batch);
    return;
  }
  const SilentBatch silent(model_->config.task_floats(), batch);
  check_output_shape_on(silent.segments);
  for (int k = 1; k < kWarmupCalls; ++k) infer(silent.segments);
}

// A split model serves through its front and its sequence, never through the
// method at full batch: warming the method on `batch` chunks twice, as other
// models warm, made oneDNN primitives and touched activations that no call
// would use. The check runs on one chunk (the method's shape, then the split
// against the method); the front then warms on full batches, so a front that
// cannot take `batch` chunks fails here, and the sequence on one stream's
// longest call.
void Engine::warm_up_split(int batch) {
  const StatefulSpec& s = model_->config.stateful;
  const SilentBatch one(model_->config.task_floats(), 1);
  check_output_shape_on(one.segments);
  const std::string split = model_->dir + "/model.toml: [stateful.split] ";
  as_model_error(split + s.split.front + " on a batch of " + std::to_string(batch) + " silent chunks fails: ", [&] {
    const torch::Tensor chunks = torch::zeros({std::max<int64_t>(batch, 1), s.context_samples + s.chunk_samples});
    for (int k = 0; k < kWarmupCalls; ++k) split_front(chunks);
  });
  as_model_error(split + s.split.sequence + " on " + std::to_string(s.split.sequence_chunks) + " chunks fails: ", [&] {
    const std::vector<float> stream(static_cast<size_t>(s.split.sequence_chunks * s.split.feature_floats), 0.0f);
    const std::vector<float> state(static_cast<size_t>(s.state_floats()), s.state_initial);
    split_sequence(stream.data(), s.split.sequence_chunks, state.data());
  });
}

}  // namespace corepool
