// Scores whole streams of audio through a stateful model, chunk by chunk, many
// streams per engine call. Each stream is cut into lanes (stream_lanes.h);
// each lane has at most one chunk in flight, because its next chunk needs the
// state the current one returns, and that state travels inside the task: the
// engines keep none, so any engine can take any lane's next chunk, and a task
// re-dispatched after its worker died still carries the state it was sent with.
// Used by the stateful batch driver (stateful_batch.cc) and the Silero tests.
// Thread-safety: on_complete() runs on engine threads (or the supervisor's
// loop), everything else on one feeding thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "supervisor/batch/stateful_scorer.h"
#include "supervisor/batch/stream_lanes.h"
#include "worker/executor.h"

namespace corepool {

class StreamScorer : public StatefulScorer {
 public:
  StreamScorer(const ModelConfig& model, Done done);

  // Plans `samples` (at the model's rate) in lanes and makes them ready.
  void add(uint64_t stream, std::shared_ptr<const std::vector<float>> samples) override;
  // An executor whose completions may submit (Executor::submits_from_completions):
  // the result that ends an engine call then submits its lanes' next chunks
  // itself, on the engine's thread, so the engine finds them queued when it
  // looks for its next batch. nullptr (or any other executor): only pump()
  // submits. Attach before the first pump(), detach (nullptr) before the
  // executor goes.
  void attach(Executor* executor) override;
  // The executor's completion callback.
  void on_complete(SegmentResult&& r) override;
  // Waits (if `wait`) until a group of lanes is ready (an engine call's last
  // result came in, or lanes were added), then submits every ready
  // lane's next chunk at once (one try_submit, so that an engine finds them
  // all queued) and finishes the streams whose lanes all ended. False when no
  // lane is live.
  bool pump(Executor& executor, bool wait = true) override;
  // How long pump() waits for a call's last result before it sends the lanes
  // that are ready without it (a worker died having answered part of a call).
  static constexpr std::chrono::milliseconds kStraggler{20};
  size_t live_lanes() override;
  // Streams added so far that were cut into more than one lane: their scores
  // near each lane's start are the lanes', not the module's run whole.
  size_t laned_streams() override;

 private:
  struct StreamState {
    std::shared_ptr<const std::vector<float>> samples;
    std::vector<float> scores;
    size_t lanes_left = 0;
    std::string error;
  };
  struct LiveLane {
    uint64_t stream = 0;
    Lane span;
    int64_t next = 0;          // the chunk in flight, or the next to submit
    std::vector<float> state;  // what its next chunk starts from (moved into the task while one is in flight)
  };
  struct Finished {
    uint64_t stream;
    StreamState state;
  };

  struct TaskSource {
    uint64_t lane = 0;
    int64_t chunk = 0;
    bool first = false;  // the lane's first chunk: no context
    std::shared_ptr<const std::vector<float>> samples;
    std::vector<float> state;
  };
  bool record(SegmentResult&& r);                                // on_complete()'s bookkeeping, under mu_
  TaskSource take_source(uint64_t lane_id);                      // requires mu_
  SegmentTask next_task(TaskSource&& src) const;                 // without mu_
  void end_lane(uint64_t lane_id, std::vector<Finished>& done);  // requires mu_
  void report(std::vector<Finished>& done);                     // without mu_
  static bool ends_call(const SegmentResult& r);    // the last result of an engine call
  std::vector<TaskSource> take_continuing();         // requires mu_: the ended call's lanes with a next chunk
  void continue_call();                              // without mu_: submits them (see attach())
  void wait_for_call(std::unique_lock<std::mutex>& lock);  // with mu_ held by `lock`

  const ModelConfig& model_;
  Done done_;
  std::mutex mu_;
  std::condition_variable ready_cv_;
  std::map<uint64_t, StreamState> streams_;
  std::map<uint64_t, LiveLane> lanes_;  // a task's stream field is its lane's id
  std::deque<uint64_t> ready_;          // lanes with no chunk in flight
  bool group_ready_ = false;            // a call's last result came, or lanes were added, since the last pump
  Executor* inline_executor_ = nullptr;  // attach()
  std::vector<SegmentTask> overflow_;    // built by continue_call() but not queued (the queue was full): pump()'s
  uint64_t next_lane_ = 0;
  size_t laned_streams_ = 0;
};

}  // namespace corepool
