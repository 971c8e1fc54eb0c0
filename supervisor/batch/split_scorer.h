// Scores whole streams through a stateful model's split ([stateful.split]):
// every chunk's front is a task of its own, independent of every other, so
// the fronts of one long stream fill both engines' batches; a stream's
// sequence then runs along the features that are in, sequence_chunks a
// task, each from the state the last one returned. The state travels in the
// task, as StreamScorer's does: any engine takes any task, and a task
// re-dispatched after its worker died carries what it was sent with. Exact:
// no lanes, each stream runs whole. A stream may still be decoding (open(),
// extend(), close()): its fronts go as its samples come, and the samples
// every front has been built from are let go, so a long file is scored while
// it decodes and held in memory only as far as its fronts lag its decoding.
// Thread-safety: on_complete() runs on engine threads (or the supervisor's
// loop), everything else on one feeding thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>

#include "supervisor/batch/stateful_scorer.h"

namespace corepool {

class SplitScorer : public StatefulScorer {
 public:
  SplitScorer(const ModelConfig& model, Done done);

  void add(uint64_t stream, std::shared_ptr<const std::vector<float>> samples) override;
  bool takes_blocks() const override { return true; }
  void open(uint64_t stream, std::shared_ptr<const std::vector<float>> first, int64_t expected) override;
  void extend(uint64_t stream, std::shared_ptr<const std::vector<float>> block) override;
  void close(uint64_t stream, const std::string& error) override;
  // Keeps the executor's room (half its depth, see pump()) and, when its
  // completions may submit, submits a stream's next sequence from the
  // completion that made it ready: a long stream's sequences are a chain,
  // and a hop through the feeding thread at every link left the engines
  // idle (Silero, 10 min as one file: 293 links).
  void attach(Executor* executor) override;
  void on_complete(SegmentResult&& r) override;
  // Each live stream's next sequence once its features are in, then fronts
  // in stream order while the tasks out stay within the room: the queue keeps
  // a batch's worth of fronts for each engine, and a sequence waits behind
  // them no longer than that.
  bool pump(Executor& executor, bool wait = true) override;
  // Fronts not yet submitted, plus tasks out.
  size_t live_lanes() override;
  size_t laned_streams() override { return 0; }

  // A task's index: the chunk (a front), or the sequence's first chunk with this bit set.
  static constexpr uint64_t kSequenceBit = uint64_t{1} << 63;
  // How long pump() waits for news before it looks anyway.
  static constexpr std::chrono::milliseconds kPatience{20};

 private:
  struct Block {  // decoded samples, from `start` in the stream
    int64_t start;
    std::shared_ptr<const std::vector<float>> samples;
  };
  struct Stream {
    std::deque<Block> blocks;      // from the first a front not yet built needs
    int64_t total = 0;             // samples in so far
    int64_t expected_chunks = 0;   // open(): the whole stream's, if its length was known
    bool closed = false;           // no more samples come
    int64_t chunks = 0;            // chunks whose samples are in (with the last, padded one once closed)
    // Chunks [features_from, chunks) x feature_floats, as the fronts come back;
    // the rows before are the sequences' (let_go_features()).
    std::vector<float> features;
    int64_t features_from = 0;
    std::vector<uint8_t> front;    // per chunk: 0 not sent, 1 out, 2 in
    int64_t front_next = 0;        // the first chunk whose front is not sent
    int64_t ready = 0;             // the fronts of [0, ready) are in
    int64_t sequence_next = 0;     // the first chunk no sequence has run
    int64_t sequence_out = 0;      // chunks of the sequence out; 0 = none
    std::vector<float> state;      // what the next sequence starts from
    std::vector<float> scores;     // chunks x labels
    size_t out = 0;                // its tasks out
    std::string error;
    bool done() const { return closed && (error.empty() ? sequence_next == chunks : out == 0); }
  };
  struct Planned {  // a task to build outside the lock
    uint64_t stream;
    int64_t first, count;
    bool sequence;
    std::vector<Block> window;   // fronts: the blocks their samples are in
    std::vector<float> payload;  // a sequence: its features then state
  };
  static void fail(Stream& s, int64_t chunk, const std::string& why);
  void grow(Stream& s) const;  // chunks and per-chunk records after samples came; requires mu_
  void let_go_features(Stream& s, int64_t upto) const;  // rows before `upto` are taken; requires mu_
  // `count` fronts of the stream from front_next, as one Planned; requires mu_.
  void plan_fronts(uint64_t id, Stream& s, int64_t count, std::vector<Planned>& planned);
  void record_front(Stream& s, const SegmentResult& r);     // requires mu_
  void record_sequence(Stream& s, const SegmentResult& r);  // requires mu_
  void plan(std::vector<Planned>& planned);                 // requires mu_
  // The stream's next sequence if its features are in and none is out; requires mu_.
  bool plan_sequence(uint64_t id, Stream& s, std::vector<Planned>& planned);
  // Fronts of the stream to go with the sequence a completion submits; requires mu_.
  void plan_company(uint64_t id, Stream& s, std::vector<Planned>& planned);
  void learn_costs(const SegmentResult& r);  // requires mu_
  SegmentTask build_front(uint64_t stream, int64_t chunk, const std::vector<Block>& window) const;
  void append_tasks(Planned&& p, std::vector<SegmentTask>& tasks) const;  // every task of `p`

  const ModelConfig& model_;
  Done done_;
  std::mutex mu_;
  std::condition_variable news_cv_;
  bool news_ = false;
  std::map<uint64_t, Stream> streams_;
  size_t out_ = 0;   // tasks out, every stream's
  size_t room_ = 1;  // attach(): half the executor's depth
  Executor* inline_executor_ = nullptr;  // attach(): one whose completions may submit
  int engines_ = 1;                      // attach(): the executor's workers
  double front_ns_ = 0, sequence_ns_ = 0;  // learn_costs(): a front's and a whole sequence's cost, averaged
  std::vector<SegmentTask> overflow_;    // a completion's sequence the queue had no room for: pump()'s
};

}  // namespace corepool
