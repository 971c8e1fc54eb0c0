// stateful_task.h: the layout is ModelConfig::task_floats() / result_floats().
#include "worker/stateful_task.h"

#include <algorithm>

namespace corepool {

SegmentTask stateful_task(const ModelConfig& model, uint64_t stream, uint64_t index, const float* audio, int64_t n,
                          int64_t offset, const std::vector<float>& state) {
  const StatefulSpec& s = model.stateful;
  SegmentTask task;
  task.stream = stream;
  task.index = index;
  task.samples.assign(static_cast<size_t>(model.task_floats()), 0.0f);
  if (n > 0) std::copy(audio, audio + n, task.samples.begin() + offset);
  std::copy(state.begin(), state.end(), task.samples.begin() + s.context_samples + s.chunk_samples);
  return task;
}

std::string stateful_result_error(const ModelConfig& model, const SegmentResult& r) {
  if (!r.error.empty()) return "chunk " + std::to_string(r.index) + ": " + r.error;
  if (r.scores.size() != static_cast<size_t>(model.result_floats())) {
    return "chunk " + std::to_string(r.index) + ": result of the wrong size";
  }
  return "";
}

void take_state(const ModelConfig& model, const SegmentResult& r, std::vector<float>& state) {
  state.assign(r.scores.begin() + static_cast<std::ptrdiff_t>(model.labels.size()), r.scores.end());
}

}  // namespace corepool
