// The seam between the batch/serving front end and whatever runs inference:
// thread mode (ThreadExecutor, engine threads in this process) or process
// mode (ProcessPool, forked workers behind shared-memory rings). The front end
// submits PCM segments (or, for KServe v2 infer, the model's own input) and
// receives scores through one callback.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace corepool {

// What a task's floats are: PCM for the feature step, or one item of the
// model's input tensor that goes to forward() as is (no feature extraction).
// A stateful model with a split ([stateful.split]) also takes the split's two
// halves: kSplitFront, one chunk (context + chunk samples) whose result is its
// feature_floats features; kSplitSequence, T consecutive chunks' features of
// one stream then its state (T * feature_floats + state floats, 1 <= T <=
// sequence_chunks), whose result is T * labels scores then the new state.
enum class TaskInput : uint8_t { kPcm, kModelInput, kSplitFront, kSplitSequence };

struct SegmentTask {
  uint64_t stream = 0;         // which file / request the segment belongs to
  uint64_t index = 0;          // position of the segment in its stream
  // kPcm: segment_samples() floats at the model's rate. kModelInput: exactly
  // ModelConfig::item_floats() floats, row-major in item_shape(). A stateful
  // model's task, either kind: context + chunk samples, then the stream's state
  // (ModelConfig::task_floats()). A task of the wrong size is answered with an
  // error result, never run.
  std::vector<float> samples;
  TaskInput input = TaskInput::kPcm;
};

// Where one segment's time went (Triton's statistics), in nanoseconds; the
// batch figures are those of the forward() that ran it, shared by its items.
// All zero for a segment that never ran (cancelled, or the wrong size).
struct SegmentTiming {
  uint64_t queue_ns = 0;   // submitted -> an engine took it (executor queue, shm ring)
  uint64_t input_ns = 0;   // its batch's features and copy-in
  uint64_t infer_ns = 0;   // its batch's forward()
  uint64_t output_ns = 0;  // its batch's copy-out of the scores
  uint32_t batch = 0;      // items in that forward(); 0 = it never ran
  uint32_t batch_pos = 0;  // its place there: the item at 0 stands for the execution
  int32_t engine = -1;     // the engine thread (thread mode) or worker (process mode) that ran it
};

struct SegmentResult {
  uint64_t stream = 0;
  uint64_t index = 0;
  std::vector<float> scores;   // one per label (a stateful model: then its new
                               // state, ModelConfig::result_floats()); empty when error is set
  std::string error;           // non-empty: this segment failed (message says why)
  SegmentTiming timing;
};

// A snapshot for /metrics and readiness. Counters only grow for the life of
// the executor, worker respawns included.
struct ExecutorStats {
  size_t outstanding = 0;             // submitted, not yet completed
  size_t depth = 0;                   // the bound on outstanding
  std::vector<double> busy_seconds;   // per worker slot: time in features + forward()
  std::vector<int> pids;              // process mode: pid per slot, 0 while respawning
  bool all_ready = false;             // every worker can take work
  uint64_t restarts = 0, redispatched = 0, poisoned = 0;  // process mode (PoolCounters)
  uint64_t batches = 0, segments = 0;  // forward() calls and segments they ran
  uint64_t cancelled = 0;              // segments dropped unrun by cancel()
  // Process mode: workers replaced on purpose (engine.max_requests, max_rss_mb).
  uint64_t recycled_max_requests = 0, recycled_max_rss = 0;
};

class Executor {
 public:
  // Called exactly once per submitted task, on an engine thread (thread mode)
  // or the supervisor's loop thread (process mode). Must not call submit(),
  // nor try_submit() unless submits_from_completions().
  using Completion = std::function<void(SegmentResult&&)>;

  virtual ~Executor() = default;
  // Blocks while the bounded queue is full: backpressure, never unbounded memory.
  virtual void submit(SegmentTask task) = 0;
  // All or none, never blocks (for an event-loop thread): if every task fits
  // the free queue space they are all queued, `tasks` is left empty and the
  // result is true; otherwise nothing is queued, `tasks` is untouched, false.
  // More tasks than stats().depth never fit.
  virtual bool try_submit(std::vector<SegmentTask>& tasks) = 0;
  // Returns once every task submitted so far has completed.
  virtual void wait_idle() = 0;
  // Never blocks. The stream's tasks that no engine has started are completed
  // at once with an error (their queue space is free again); the ones already
  // running finish and complete as usual, and are never run again (a dead
  // worker's cancelled tasks are not re-dispatched). For a request whose
  // deadline passed: the caller drops whatever still arrives for `stream`.
  virtual void cancel(uint64_t stream) = 0;
  virtual int workers() const = 0;
  // Thread-safe and cheap: callable from any thread while work runs.
  virtual ExecutorStats stats() const = 0;
  // True when a Completion may call try_submit() (never submit()): thread
  // mode runs completions on its engine threads outside every lock of its own;
  // the process pool inside a pass of its loop, which then dispatches what
  // they added before the pass ends. False (the default) for any other.
  virtual bool submits_from_completions() const { return false; }
};

}  // namespace corepool
