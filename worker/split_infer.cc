// Engine's split calls ([stateful.split]): the front over many chunks at once,
// the sequence over streams' consecutive chunks, and the check that the two
// together say what the method says chunk by chunk. Why the split exists:
// one stream's chunks otherwise run one call each (the next needs the state
// the last returned), and a call of one chunk costs what a call of ten does.
#include <chrono>
#include <cstring>
#include <map>

#include "worker/engine.h"
#include "worker/model/torch_module.h"
#include "worker/shape_text.h"
#include "worker/state_layout.h"

namespace corepool {

torch::Tensor Engine::split_front(const torch::Tensor& x) {
  const SplitSpec& split = model_->config.stateful.split;
  c10::InferenceMode guard;
  const torch::Tensor out = method_.get_method(split.front)({x}).toTensor().to(torch::kFloat32).contiguous();
  if (out.dim() < 1 || out.size(0) != x.size(0) || out.numel() != x.size(0) * split.feature_floats) {
    throw ModelError(model_->dir + "/model.pt: " + split.front + " returned " + shape_text(out) + " for " +
                     std::to_string(x.size(0)) + " chunks, model.toml's [stateful.split] feature_floats = " +
                     std::to_string(split.feature_floats));
  }
  return out.reshape({x.size(0), split.feature_floats});
}

std::vector<std::vector<float>> Engine::split_sequences(const std::vector<const float*>& items, int64_t chunks) {
  const StatefulSpec& s = model_->config.stateful;
  const int64_t labels = static_cast<int64_t>(model_->config.labels.size());
  const int64_t n = static_cast<int64_t>(items.size()), width = s.split.feature_floats;
  const StateLayout layout(s);
  c10::InferenceMode guard;
  torch::Tensor f = torch::empty({chunks, n, width});
  torch::Tensor st = torch::empty(batched_state_shape(s, n));
  float* fp = f.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t t = 0; t < chunks; ++t) {
      std::memcpy(fp + (t * n + i) * width, items[i] + t * width, width * sizeof(float));
    }
    layout.gather(items[i] + chunks * width, st.data_ptr<float>(), i, n);
  }
  const torch::jit::IValue out = method_.get_method(s.split.sequence)({f, st});
  const std::string pt = model_->dir + "/model.pt: " + s.split.sequence;
  if (!out.isTuple() || out.toTuple()->elements().size() != 2 || !out.toTuple()->elements()[0].isTensor() ||
      !out.toTuple()->elements()[1].isTensor()) {
    throw ModelError(pt + " must return (scores, state)");
  }
  const torch::Tensor scores = out.toTuple()->elements()[0].toTensor().to(torch::kFloat32).contiguous();
  const torch::Tensor next = out.toTuple()->elements()[1].toTensor().to(torch::kFloat32).contiguous();
  if (scores.dim() != 3 || scores.size(0) != chunks || scores.size(1) != n || scores.size(2) != labels) {
    throw ModelError(pt + " returned scores " + shape_text(scores) + " for " + std::to_string(chunks) + " chunks of " +
                     std::to_string(n) + " streams, " + std::to_string(labels) + " labels");
  }
  if (next.sizes() != torch::IntArrayRef(batched_state_shape(s, n))) {
    throw ModelError(pt + " returned a state " + shape_text(next) + ", not model.toml's state_shape at batch " +
                     std::to_string(n));
  }
  const float* sp = scores.data_ptr<float>();
  std::vector<std::vector<float>> results(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    std::vector<float>& r = results[static_cast<size_t>(i)];
    r.reserve(static_cast<size_t>(chunks * labels + s.state_floats()));
    for (int64_t t = 0; t < chunks; ++t) r.insert(r.end(), sp + (t * n + i) * labels, sp + (t * n + i + 1) * labels);
    layout.scatter(next.data_ptr<float>(), i, n, r);
  }
  return results;
}

std::vector<float> Engine::split_sequence(const float* features, int64_t chunks, const float* state) {
  const StatefulSpec& s = model_->config.stateful;
  std::vector<float> item(features, features + chunks * s.split.feature_floats);
  item.insert(item.end(), state, state + s.state_floats());
  return std::move(split_sequences({item.data()}, chunks).front());
}

// Steps first (the method on their chunks, one call), then the fronts (one
// call), then the sequences (one call per length): a batch's items are
// independent, so any order gives the same results; each goes back in its
// item's place.
std::vector<std::vector<float>> Engine::split_items(const std::vector<BatchItem>& items, EngineTiming* timing) {
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point t) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count());
  };
  const StatefulSpec& s = model_->config.stateful;
  std::vector<std::vector<float>> results(items.size());
  std::vector<size_t> steps, fronts, sequences;
  for (size_t i = 0; i < items.size(); ++i) {
    const TaskInput kind = items[i].input;
    (kind == TaskInput::kSplitFront ? fronts : kind == TaskInput::kSplitSequence ? sequences : steps).push_back(i);
  }
  EngineTiming total;
  if (!steps.empty()) {
    std::vector<BatchItem> chunk_items;
    for (const size_t i : steps) chunk_items.push_back(items[i]);
    EngineTiming t;
    std::vector<std::vector<float>> out = stateful_infer(chunk_items, &t);
    for (size_t k = 0; k < steps.size(); ++k) results[steps[k]] = std::move(out[k]);
    total = t;
  }
  if (!fronts.empty()) {
    auto t0 = Clock::now();
    const int64_t width = s.context_samples + s.chunk_samples;
    torch::Tensor x = torch::empty({static_cast<int64_t>(fronts.size()), width});
    for (size_t k = 0; k < fronts.size(); ++k) {
      std::memcpy(x.data_ptr<float>() + k * width, items[fronts[k]].data, width * sizeof(float));
    }
    total.input_ns += since(t0);
    t0 = Clock::now();
    const torch::Tensor features = split_front(x);
    total.infer_ns += since(t0);
    t0 = Clock::now();
    const float* f = features.data_ptr<float>();
    for (size_t k = 0; k < fronts.size(); ++k) {
      results[fronts[k]].assign(f + k * s.split.feature_floats, f + (k + 1) * s.split.feature_floats);
    }
    total.output_ns += since(t0);
  }
  // Sequences of the same length run together, one stream per batch row.
  std::map<int64_t, std::vector<size_t>> by_length;
  for (const size_t i : sequences) {
    by_length[static_cast<int64_t>(items[i].floats - s.state_floats()) / s.split.feature_floats].push_back(i);
  }
  for (const auto& [chunks, group] : by_length) {
    const auto t0 = Clock::now();
    std::vector<const float*> data;
    for (const size_t i : group) data.push_back(items[i].data);
    std::vector<std::vector<float>> out = split_sequences(data, chunks);
    for (size_t k = 0; k < group.size(); ++k) results[group[k]] = std::move(out[k]);
    total.infer_ns += since(t0);
  }
  if (timing) *timing = total;
  return results;
}

// Two streams of six chunks: the method chunk by chunk (states carried between
// calls) against the front over all twelve and the sequence over each stream.
void Engine::check_split() {
  const StatefulSpec& s = model_->config.stateful;
  if (!s.split.enabled()) return;
  constexpr int64_t kStreams = 2, kChunks = 6;
  const int64_t width = s.context_samples + s.chunk_samples;
  const int64_t labels = static_cast<int64_t>(model_->config.labels.size());
  auto gen = at::detail::createCPUGenerator(20261201);
  const torch::Tensor x = torch::randn({kChunks, kStreams, width}, gen) * 0.1;
  c10::InferenceMode guard;
  torch::Tensor state = torch::full(batched_state_shape(s, kStreams), s.state_initial);
  std::vector<torch::Tensor> want;
  for (int64_t c = 0; c < kChunks; ++c) {
    const auto out = method_.forward({x[c], state}).toTuple();
    want.push_back(out->elements().at(s.score_output).toTensor().to(torch::kFloat32));
    state = out->elements().at(s.state_output).toTensor().to(torch::kFloat32);
  }
  const torch::Tensor want_scores = torch::stack(want, 1);  // [streams, chunks, labels]
  const torch::Tensor features = split_front(x.transpose(0, 1).reshape({kStreams * kChunks, width}));
  // Both streams in one sequence call, as an engine batches them.
  std::vector<std::vector<float>> items(kStreams);
  std::vector<const float*> data;
  for (int64_t i = 0; i < kStreams; ++i) {
    const float* rows = features.data_ptr<float>() + i * kChunks * s.split.feature_floats;
    items[i].assign(rows, rows + kChunks * s.split.feature_floats);
    items[i].resize(items[i].size() + static_cast<size_t>(s.state_floats()), s.state_initial);
    data.push_back(items[i].data());
  }
  const std::vector<std::vector<float>> got = split_sequences(data, kChunks);
  double worst = 0;
  for (int64_t i = 0; i < kStreams; ++i) {
    std::vector<float> one = got[i];
    const torch::Tensor got_scores = torch::from_blob(one.data(), {kChunks, labels});
    const torch::Tensor got_state = torch::from_blob(one.data() + kChunks * labels, batched_state_shape(s, 1));
    worst = std::max(worst, (got_scores - want_scores[i]).abs().max().item<double>());
    worst = std::max(worst, (got_state - state.narrow(s.batch_dim(), i, 1)).abs().max().item<double>());
  }
  if (!(worst <= kSplitTolerance)) {
    throw ModelError(model_->dir + "/model.toml: [stateful.split] " + s.split.front + " + " + s.split.sequence +
                     " differ from the method run chunk by chunk by " + std::to_string(worst) + " (tolerance " +
                     std::to_string(kSplitTolerance) + ")");
  }
}

}  // namespace corepool
