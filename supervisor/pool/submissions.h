// The pool's intake: what submitters (the batch reader, the HTTP loop) hand
// over, under one mutex: tasks not yet seen by the loop, cancelled streams,
// the outstanding count behind back-pressure, and the stop request. The
// submitters call submit()/try_add()/cancel()/wait_idle(); the supervisor loop
// takes what is pending and reports each delivery back through completed().
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "worker/executor.h"

namespace corepool::pool {

// One submitted segment, from submit() to its one delivery.
struct Request {
  uint64_t id = 0;          // never reused: a late completion of an earlier dispatch is told apart
  SegmentTask task;
  int kills = 0;            // workers that died while running it (poison input at options.poison_kills)
  std::string last_death;   // how the last of them died
  bool cancelled = false;   // its stream was cancelled while it ran: never re-dispatch it
  int64_t submitted_ns = 0;  // CLOCK_MONOTONIC at submit: its queue time runs until a worker takes it
  int worker = -1;           // the worker it goes to while that one has room (-1: the least loaded)
};

class Submissions {
 public:
  explicit Submissions(size_t depth) : depth_(depth) {}

  // Blocks while `depth` segments are queued or in flight.
  void submit(SegmentTask task);
  // All of `tasks` or none (false: over depth, `tasks` untouched); never blocks.
  // `worker` >= 0: they go to that worker while it takes work and has room.
  bool try_add(std::vector<SegmentTask>& tasks, int worker = -1);
  // False once a stop was requested: a stopping pool has nothing to cancel.
  bool cancel(uint64_t stream);
  void wait_idle();
  void request_stop();

  // Supervisor loop: moves what is pending, in order, to the end of
  // `follow_ups` (requests a completion submitted: Request::worker set) or of
  // `plain`; returns whether a stop was requested.
  bool take_pending(std::deque<Request>& plain, std::deque<Request>& follow_ups);
  std::vector<uint64_t> take_cancels();
  bool stop_requested() const;
  // One delivery: frees its place for a blocked submit().
  void completed();

  size_t outstanding() const;
  size_t depth() const { return depth_; }

 private:
  void enqueue_locked(SegmentTask&& task, int worker = -1);  // caller holds mu_ and counted it in outstanding_

  const size_t depth_;
  mutable std::mutex mu_;
  std::condition_variable space_cv_;
  std::condition_variable idle_cv_;
  std::deque<Request> pending_;    // submitted, not yet seen by the loop
  std::vector<uint64_t> cancels_;  // streams cancelled, not yet seen by the loop
  size_t outstanding_ = 0;         // submitted, not yet delivered
  uint64_t next_id_ = 1;
  bool stop_requested_ = false;
};

}  // namespace corepool::pool
