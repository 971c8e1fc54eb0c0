// Engine::stateful_infer(): B streams' next chunks in one call. Each task
// carries its stream's state, so the engine keeps none: it gathers B items
// into x [B, context + chunk] and the state tensor (batch at the configured
// dimension), calls the method once, and scatters each item's scores and new
// state into its result. Any engine can take any stream's next chunk, and a
// task re-dispatched after a worker died carries the state it was sent with.
#include <chrono>
#include <cstring>

#include "worker/engine.h"
#include "worker/shape_text.h"
#include "worker/state_layout.h"

namespace corepool {
namespace {

torch::Tensor output_tensor(const c10::ivalue::Tuple& out, int index, const std::string& what, const std::string& pt) {
  if (index >= static_cast<int>(out.elements().size()) || !out.elements()[index].isTensor()) {
    throw ModelError(pt + ": output " + std::to_string(index) + " (" + what + ") is not a Tensor of the " +
                     std::to_string(out.elements().size()) + "-tuple forward() returned");
  }
  return out.elements()[index].toTensor().to(torch::kFloat32).contiguous();
}

}  // namespace

std::vector<std::vector<float>> Engine::stateful_infer(const std::vector<BatchItem>& items, EngineTiming* timing) {
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point t) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count());
  };
  const ModelConfig& config = model_->config;
  const StatefulSpec& s = config.stateful;
  const std::string pt = model_->dir + "/model.pt";
  const int64_t batch = static_cast<int64_t>(items.size());
  const int64_t width = s.context_samples + s.chunk_samples;
  const StateLayout layout(s);
  auto t0 = Clock::now();
  torch::Tensor x = torch::empty({batch, width});
  torch::Tensor state = torch::empty(batched_state_shape(s, batch));
  float* xp = x.data_ptr<float>();
  float* sp = state.data_ptr<float>();
  for (int64_t i = 0; i < batch; ++i) {
    std::memcpy(xp + i * width, items[i].data, width * sizeof(float));
    layout.gather(items[i].data + width, sp, i, batch);
  }
  if (timing) timing->input_ns = since(t0);
  t0 = Clock::now();
  const torch::jit::IValue out = method_.forward({x, state});
  if (timing) timing->infer_ns = since(t0);
  t0 = Clock::now();
  if (!out.isTuple()) throw ModelError(pt + ": stateful forward() must return a tuple, returned " + out.tagKind());
  const auto& tuple = *out.toTuple();
  const torch::Tensor scores = output_tensor(tuple, s.score_output, "scores", pt);
  const torch::Tensor next = output_tensor(tuple, s.state_output, "state", pt);
  const int64_t labels = static_cast<int64_t>(config.labels.size());
  if (scores.dim() != 2 || scores.size(0) != batch || scores.size(1) != labels) {
    throw ModelError(pt + ": score output shape " + shape_text(scores) + " does not match [" + std::to_string(batch) +
                     ", " + std::to_string(labels) + "] (batch, labels in model.toml)");
  }
  if (next.sizes() != torch::IntArrayRef(batched_state_shape(s, batch))) {
    throw ModelError(pt + ": state output shape " + shape_text(next) + " does not match state_shape in model.toml");
  }
  const float* scores_p = scores.data_ptr<float>();
  const float* next_p = next.data_ptr<float>();
  std::vector<std::vector<float>> results(batch);
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<float>& r = results[i];
    r.reserve(labels + s.state_floats());
    r.assign(scores_p + i * labels, scores_p + (i + 1) * labels);
    layout.scatter(next_p, i, batch, r);
  }
  if (timing) timing->output_ns = since(t0);
  return results;
}

}  // namespace corepool
