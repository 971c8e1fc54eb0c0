// Dispatcher: requests from the queue into workers' slab slots and rings, and
// their completions back out to the pool's Completion (see dispatch.h).
// Exactly-once delivery rests on two facts: a request is in exactly one of
// queue_ / in_flight_ until delivered, and a completion counts only if its
// slab slot is still owned by its request id (otherwise it is a late duplicate).
#include "supervisor/pool/dispatch.h"

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "shm/descriptor_check.h"

namespace corepool::pool {
namespace {

constexpr const char* kCancelled = "cancelled: the request's deadline passed";

// What a worker wrote next to its result, with the queue time ours to compute
// (a clock skew cannot go negative: a worker's bad number is clamped).
SegmentTiming timing_of(const shm::SlotTiming& t, int64_t submitted_ns) {
  SegmentTiming out;
  out.queue_ns = t.taken_ns > submitted_ns ? static_cast<uint64_t>(t.taken_ns - submitted_ns) : 0;
  out.input_ns = t.input_ns;
  out.infer_ns = t.infer_ns;
  out.output_ns = t.output_ns;
  out.batch = std::min<uint32_t>(t.batch, shm::kMaxBatch);
  out.batch_pos = t.batch_pos;
  return out;
}

// The descriptor's flag for a task's kind (kPcm has none).
uint32_t kind_flag(TaskInput input) {
  switch (input) {
    case TaskInput::kModelInput: return shm::kModelInput;
    case TaskInput::kSplitFront: return shm::kSplitFront;
    case TaskInput::kSplitSequence: return shm::kSplitSequence;
    case TaskInput::kPcm: break;
  }
  return 0;
}

}  // namespace

Dispatcher::Dispatcher(const ProcessPoolOptions& options, const shm::ChannelLayout& layout, uint32_t labels,
                       Executor::Completion on_complete, Submissions& submissions, PoolMirror& mirror)
    : options_(options),
      layout_(layout),
      labels_(labels),
      on_complete_(std::move(on_complete)),
      submissions_(submissions),
      mirror_(mirror) {}

// A plain request goes to the least-loaded worker, but never to one running
// follow-ups (requests its own completions submitted: a stateful model's next
// sequence, its lanes' next chunks) while some worker runs none: a
// follow-up's worker takes its next one after whatever else its ring holds,
// and one long file's chain of sequences, the run's critical path, then
// waited behind calls of fronts at every link. Plain requests wait for that
// worker's slots instead. (Silero, 10 min as one file: both workers ran every
// front first, 190 ms in calls of 256, and then one of them the 566 links left
// alone while the other idled.) With follow-ups everywhere, or none, this is
// plain least-loaded. A worker still starting (a respawn, or the second of a
// batch pool that began with the first ready) takes work only when every
// ready worker's slots are full: what waits in its ring waits for its boot.
Worker* Dispatcher::least_loaded(WorkerTable& table) const {
  bool some_without = false, some_ready = false;
  for (auto& w : table.slots()) {
    some_without = some_without || (takes_work(w->state) && w->follow_ups == 0);
    some_ready = some_ready || (w->state == WorkerState::kReady && w->slots.in_use() < w->slots.capacity());
  }
  Worker* best = nullptr;
  for (auto& w : table.slots()) {
    if (!takes_work(w->state) || w->slots.in_use() >= w->slots.capacity()) continue;
    if (some_without && w->follow_ups > 0) continue;
    if (some_ready && w->state != WorkerState::kReady) continue;
    if (!best || w->slots.in_use() < best->slots.in_use()) best = w.get();
  }
  return best;
}

// The request's own worker while it takes work and has a free slot (a
// stateful model's lanes stay on the worker that ran their last chunk, as one
// group: spread by load, two calls ending in one pass mixed their lanes and
// a worker's next call took part of the other's group), else the least loaded.
Worker* Dispatcher::target(WorkerTable& table, const Request& req) const {
  if (req.worker >= 0 && static_cast<size_t>(req.worker) < table.slots().size()) {
    Worker& w = *table.slots()[static_cast<size_t>(req.worker)];
    if (takes_work(w.state) && w.slots.in_use() < w.slots.capacity()) return &w;
  }
  return least_loaded(table);
}

// Copies `req` into a free slab slot of `w` and stages its descriptor
// (dispatch() publishes the round's at once).
bool Dispatcher::push(Worker& w, Request& req) {
  const uint32_t slot = *w.slots.acquire();  // a free slot exists: least_loaded() checked
  char* dst = static_cast<char*>(w.segment.data()) + layout_.slab_offset + layout_.slab.offset_of(slot);
  const size_t n = std::min<size_t>(req.task.samples.size(), layout_.result_offset / sizeof(float));
  std::memcpy(dst, req.task.samples.data(), n * sizeof(float));
  // The worker checks the size against the kind before it reads the slot; a
  // task too big for the slot is copied short and fails that check.
  const uint32_t flags = (req.kills > 0 ? shm::kRunAlone : 0u) | kind_flag(req.task.input);
  const auto floats = static_cast<uint32_t>(std::min<size_t>(req.task.samples.size(), UINT32_MAX));
  // The ring has at least as many slots as the slab, so with a free slab slot
  // a push can only fail if the worker wrote a head from the future into its ring.
  if (!w.requests->try_stage({req.id, slot, floats, flags, 0u})) {
    w.slots.release(slot);
    return false;
  }
  w.slot_owner[slot] = req.id;
  return true;
}

// Pushes from the front of `from` while its front has a worker.
void Dispatcher::dispatch_from(std::deque<Request>& from, WorkerTable& table, std::vector<Worker*>& pushed) {
  while (!from.empty()) {
    Worker* best = target(table, from.front());
    if (!best) break;
    if (!push(*best, from.front())) {
      // The request stays at the front of the queue for another worker.
      spdlog::error("worker {} (pid {}) corrupted its request ring; killing it", best->index, best->pid);
      table.kill(*best);
      continue;
    }
    const uint64_t id = from.front().id;
    if (from.front().worker == best->index) ++best->follow_ups;
    in_flight_.emplace(id, std::move(from.front()));
    from.pop_front();
    if (std::find(pushed.begin(), pushed.end(), best) == pushed.end()) pushed.push_back(best);
  }
}

void Dispatcher::dispatch(WorkerTable& table) {
  std::vector<Worker*> pushed;
  dispatch_from(follow_ups_, table, pushed);  // first: each is on its chain's critical path
  dispatch_from(queue_, table, pushed);
  // The round's requests appear in each ring at once, then one wake per
  // worker: the worker batches what it finds. Published one by one, a worker
  // awake from its last call took the first few as a batch of their own and
  // a stateful model's lanes, one chunk behind from then on, came apart into
  // ever smaller calls (Silero, 200 files: calls of 1, then 95, 83 ... 2).
  for (Worker* w : pushed) {
    w->requests->publish();
    w->requests->wake_consumer();
  }
  if (table.none_left() && !(queue_.empty() && follow_ups_.empty())) {
    fail_all_queued("no worker left: every worker failed to start");
  }
}

bool Dispatcher::drain_completions(Worker& w) {
  if (!w.completions) return true;
  while (shm::CompletionDesc* c = w.completions->front()) {
    const shm::CompletionDesc done = *c;
    w.completions->pop();
    if (done.slot >= w.slot_owner.size() || w.slot_owner[done.slot] != done.request) {
      mirror_.count(&PoolCounters::duplicates);  // a late answer for a request already re-dispatched
      continue;
    }
    w.slot_owner[done.slot] = 0;
    w.slots.release(done.slot);
    auto it = in_flight_.find(done.request);
    if (it == in_flight_.end()) continue;
    if (it->second.worker == w.index && w.follow_ups > 0) --w.follow_ups;
    // The worker's memory may be corrupt: decode_completion reads only inside the slot.
    const char* slab = static_cast<const char*>(w.segment.data()) + layout_.slab_offset;
    shm::DecodedCompletion decoded = shm::decode_completion(done, slab, layout_, labels_);
    SegmentResult r{it->second.task.stream, it->second.task.index, std::move(decoded.scores),
                    std::move(decoded.error), {}};
    if (!decoded.problem.empty()) {
      r.error = "worker " + std::to_string(w.index) + " sent a corrupt completion: " + decoded.problem;
    }
    if (r.error.empty()) {
      r.timing = timing_of(decoded.timing, it->second.submitted_ns);
      r.timing.engine = w.index;
    }
    in_flight_.erase(it);
    delivering_ = w.index;
    deliver(std::move(r));
    delivering_ = -1;
  }
  return !w.completions->corrupt();
}

void Dispatcher::deliver(SegmentResult&& result) {
  on_complete_(std::move(result));
  submissions_.completed();
}

void Dispatcher::requeue_in_flight(Worker& w, const ExitVerdict& verdict, bool shutting_down) {
  // Everything the dead worker held goes back to the front of the queue, in
  // its original order. If the worker crashed, the batch it was running is
  // suspect: only those requests (never the rest of its ring) count a kill.
  std::vector<uint64_t> suspects;
  if (verdict.crashed) {
    const shm::WorkerControl& control = w.channel->control;
    const uint32_t n = std::min(control.running_count.load(std::memory_order_acquire), shm::kMaxBatch);
    for (uint32_t i = 0; i < n; ++i) suspects.push_back(control.running[i].load(std::memory_order_relaxed));
  }
  std::vector<uint64_t> ids;
  for (uint64_t id : w.slot_owner) {
    if (id != 0) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end(), std::greater<>());  // pushed to the front newest first: oldest ends first
  for (uint64_t id : ids) {
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) continue;
    Request req = std::move(it->second);
    in_flight_.erase(it);
    if (req.cancelled) {  // its request is answered already (deadline): nothing to run it for
      deliver({req.task.stream, req.task.index, {}, kCancelled, {}});
      continue;
    }
    const bool suspect = std::find(suspects.begin(), suspects.end(), id) != suspects.end();
    if (poisoned(req, suspect, verdict.how, shutting_down)) continue;
    mirror_.count(&PoolCounters::redispatched);
    queue_.push_front(std::move(req));
  }
  w.slot_owner.assign(layout_.slab.slot_count, 0);
  w.slots.reset();
  w.follow_ups = 0;
}

// A request that has now been running in `poison_kills` crashed workers is
// answered with an error instead of crash-looping the pool. Returns whether
// it was (and so is delivered).
bool Dispatcher::poisoned(Request& req, bool suspect, const std::string& how, bool shutting_down) {
  if (!suspect) return false;
  req.kills += 1;
  req.last_death = how;
  if (shutting_down || req.kills < options_.poison_kills) return false;
  mirror_.count(&PoolCounters::poisoned);
  spdlog::error("segment {} of stream {} killed {} workers (last {}): failing it as poison input", req.task.index,
                req.task.stream, req.kills, how);
  deliver({req.task.stream, req.task.index, {},
           "poison input: this segment was being processed by " + std::to_string(req.kills) +
               " workers that died (last " + how + ")", {}});
  return true;
}

// Queued tasks of a cancelled stream complete now with an error (freeing
// their queue space); tasks already in a worker run to the end but are
// marked, so that a death does not re-dispatch them.
void Dispatcher::apply_cancels(const std::vector<uint64_t>& streams) {
  if (streams.empty()) return;
  auto cancelled = [&](const Request& r) {
    return std::find(streams.begin(), streams.end(), r.task.stream) != streams.end();
  };
  for (auto& [id, req] : in_flight_) req.cancelled = req.cancelled || cancelled(req);
  std::vector<Request> dropped;
  for (std::deque<Request>* q : {&follow_ups_, &queue_}) {
    std::deque<Request> kept;
    for (Request& r : *q) {
      if (cancelled(r)) {
        dropped.push_back(std::move(r));
      } else {
        kept.push_back(std::move(r));
      }
    }
    q->swap(kept);
  }
  mirror_.count(&PoolCounters::cancelled, dropped.size());
  for (Request& r : dropped) deliver({r.task.stream, r.task.index, {}, kCancelled, {}});
}

void Dispatcher::fail_all_queued(const std::string& why) {
  for (std::deque<Request>* q : {&follow_ups_, &queue_}) {
    while (!q->empty()) {
      Request req = std::move(q->front());
      q->pop_front();
      deliver({req.task.stream, req.task.index, {}, why, {}});
    }
  }
}

}  // namespace corepool::pool
