// What the stateful batch driver (stateful_batch.cc) asks of a scorer: whole
// streams of audio in, each stream's per-chunk scores out, through an
// Executor. Two kinds: StreamScorer runs the model's method chunk by chunk
// (a stream's chunks one call each; lanes cut long streams), SplitScorer a
// model's split ([stateful.split]: fronts of many chunks in one call, then a
// sequence along each stream). make_stateful_scorer() picks the one the model
// and its lanes ask for.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "worker/executor.h"

namespace corepool {

class StatefulScorer {
 public:
  // A stream's scores, chunk-major (chunks x labels; chunk i covers samples
  // [i * chunk, (i + 1) * chunk), the last one zero-padded), or an error.
  // Called on the feeding thread (inside add() or pump()), without a lock.
  using Done = std::function<void(uint64_t stream, std::vector<float> scores, const std::string& error)>;

  virtual ~StatefulScorer() = default;
  // `samples` at the model's rate become a stream.
  virtual void add(uint64_t stream, std::shared_ptr<const std::vector<float>> samples) = 0;
  // Whether open()/extend()/close() are taken: a stream scored while it is
  // still being decoded. Scorers that need a stream whole (lanes) say no.
  virtual bool takes_blocks() const { return false; }
  // A stream that goes on: `first` is what is decoded so far, `expected` its
  // whole length in samples if known (else 0). extend() appends the next
  // block; close() ends it, with `error` (why decoding stopped) or not. An
  // error ends the stream as failed once its tasks out are back. These throw
  // std::logic_error where takes_blocks() is false.
  virtual void open(uint64_t stream, std::shared_ptr<const std::vector<float>> first, int64_t expected);
  virtual void extend(uint64_t stream, std::shared_ptr<const std::vector<float>> block);
  virtual void close(uint64_t stream, const std::string& error);
  // The executor pump() will be given (nullptr before it goes); see StreamScorer::attach().
  virtual void attach(Executor* executor) = 0;
  // The executor's completion callback.
  virtual void on_complete(SegmentResult&& r) = 0;
  // Waits (if `wait`) for results, submits what is ready, finishes the
  // streams that are done. False when no stream is live.
  virtual bool pump(Executor& executor, bool wait = true) = 0;
  // How many tasks the live streams may still want queued at once: the
  // driver opens files while this is below the executor's room.
  virtual size_t live_lanes() = 0;
  // Streams cut into lanes: their scores near each lane's start are the lanes'.
  virtual size_t laned_streams() = 0;
};

// A SplitScorer for a model with a split run without lanes (lane_seconds 0),
// else a StreamScorer.
std::unique_ptr<StatefulScorer> make_stateful_scorer(const ModelConfig& model, StatefulScorer::Done done);

}  // namespace corepool
