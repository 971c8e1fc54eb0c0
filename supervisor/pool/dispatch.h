// The dispatcher: the queue and the requests in flight. Pushes queued requests
// to the least-loaded workers, reads completions (dropping late duplicates),
// re-dispatches a dead worker's requests, fails poison input, drops cancelled
// streams; delivers each request exactly once. Driven by the supervisor loop
// (loop thread, or under its mutex); owned by ProcessPool::Impl.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "supervisor/pool/pool_mirror.h"
#include "supervisor/pool/submissions.h"
#include "supervisor/pool/worker_table.h"

namespace corepool::pool {

class Dispatcher {
 public:
  Dispatcher(const ProcessPoolOptions& options, const shm::ChannelLayout& layout, uint32_t labels,
             Executor::Completion on_complete, Submissions& submissions, PoolMirror& mirror);

  // Moves what submitters handed over into the queue; returns whether a stop
  // was requested.
  bool take_pending() { return submissions_.take_pending(queue_, follow_ups_); }
  // Queued requests of these streams complete now with an error; in-flight
  // ones run to the end but are never re-dispatched.
  void apply_cancels(const std::vector<uint64_t>& streams);
  // Queue -> the least-loaded workers that take work. A worker whose request
  // ring refuses a push is corrupt: it is killed (its requests come back
  // when it is reaped).
  void dispatch(WorkerTable& table);
  // Every completion in `w`'s ring. Returns false when the ring is corrupt:
  // the worker must be killed.
  bool drain_completions(Worker& w);
  // At-least-once: a reaped worker's requests go back to the front of the queue.
  void requeue_in_flight(Worker& w, const ExitVerdict& verdict, bool shutting_down);
  // The worker whose completions are being delivered now (inside
  // drain_completions), or -1: what a completion submits goes back to it.
  int delivering() const { return delivering_; }

 private:
  Worker* least_loaded(WorkerTable& table) const;
  Worker* target(WorkerTable& table, const Request& req) const;
  bool push(Worker& w, Request& req);
  void dispatch_from(std::deque<Request>& from, WorkerTable& table, std::vector<Worker*>& pushed);
  void deliver(SegmentResult&& result);
  void fail_all_queued(const std::string& why);
  bool poisoned(Request& req, bool suspect, const std::string& how, bool shutting_down);

  const ProcessPoolOptions& options_;
  const shm::ChannelLayout& layout_;
  const uint32_t labels_;
  Executor::Completion on_complete_;
  Submissions& submissions_;
  PoolMirror& mirror_;
  std::deque<Request> follow_ups_;                   // waiting for a slot: what completions submitted (Request::worker)
  std::deque<Request> queue_;                        // waiting for a slot: the rest
  std::unordered_map<uint64_t, Request> in_flight_;  // id -> request in some worker's slot
  int delivering_ = -1;                              // drain_completions()'s worker
};

}  // namespace corepool::pool
