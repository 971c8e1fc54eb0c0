// A stateful model's task and result layout (config/model_config.h's
// StatefulSpec): in, context + chunk samples then the stream's state; out, the
// label scores then the new state. The two drivers that carry a stream's state
// from chunk to chunk make their tasks and read their results here: the batch
// driver's StreamScorer (supervisor/batch/stream_scorer.h) and serve's live
// stateful streams (supervisor/serve/stateful_session.h). No LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "worker/executor.h"

namespace corepool {

// The task of chunk `index` of `stream`: `n` samples from `audio` land at
// `offset` in the context + chunk window (0 = the context's first sample),
// zeros elsewhere (no context at a stream's start, past its end), then `state`.
SegmentTask stateful_task(const ModelConfig& model, uint64_t stream, uint64_t index, const float* audio, int64_t n,
                          int64_t offset, const std::vector<float>& state);

// "" when `r` holds a result of the model's layout; else what went wrong, as
// "chunk N: ...".
std::string stateful_result_error(const ModelConfig& model, const SegmentResult& r);

// The new state a good result carries (past its label scores).
void take_state(const ModelConfig& model, const SegmentResult& r, std::vector<float>& state);

}  // namespace corepool
