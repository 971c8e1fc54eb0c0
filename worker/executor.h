// The seam between the batch/serving front end and whatever runs inference:
// thread mode (ThreadExecutor, engine threads in this process) today, process
// mode (forked workers behind shared-memory rings) with the shm issue. The
// front end submits PCM segments and receives scores through one callback.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace corepool {

struct SegmentTask {
  uint64_t stream = 0;         // which file / request the segment belongs to
  uint64_t index = 0;          // position of the segment in its stream
  std::vector<float> samples;  // segment_samples() floats at the model's rate
};

struct SegmentResult {
  uint64_t stream = 0;
  uint64_t index = 0;
  std::vector<float> scores;   // one per label; empty when error is set
  std::string error;           // non-empty: this segment failed (message says why)
};

class Executor {
 public:
  // Called exactly once per submitted task, on an engine thread (thread mode)
  // or the supervisor's loop thread (process mode). Must not call submit().
  using Completion = std::function<void(SegmentResult&&)>;

  virtual ~Executor() = default;
  // Blocks while the bounded queue is full: backpressure, never unbounded memory.
  virtual void submit(SegmentTask task) = 0;
  // Returns once every task submitted so far has completed.
  virtual void wait_idle() = 0;
  virtual int workers() const = 0;
};

}  // namespace corepool
