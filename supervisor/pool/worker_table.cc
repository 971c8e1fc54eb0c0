// WorkerTable, the living part: creating the slots, spawning a worker into
// one, noticing it ready, the deadlines that kill it, recycling and stopping.
// What happens once a worker has exited (verdict, back-off, respawn) is in
// worker_exit.cc. Loop thread only, or under the supervisor loop's mutex.
#include "supervisor/pool/worker_table.h"

#include <signal.h>
#include <unistd.h>

#include <cassert>
#include <cstring>
#include <new>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "shm/wake.h"
#include "supervisor/pool/process_memory.h"
#include "worker/worker_process.h"

namespace corepool::pool {

WorkerTable::WorkerTable(const ProcessPoolOptions& options, const shm::ChannelLayout& layout,
                         std::shared_ptr<const LoadedModel> model, PoolMirror& mirror)
    : options_(options), layout_(layout), model_(std::move(model)), mirror_(mirror), self_pid_(::getpid()) {}

WorkerTable::~WorkerTable() {
  for (auto& w : workers_) {
    if (w->eventfd >= 0) ::close(w->eventfd);
  }
}

void WorkerTable::create(uv_loop_t* loop, const SharedWeights* weights, uv_timer_cb on_respawn_timer) {
  weights_ = weights;
  on_respawn_timer_ = on_respawn_timer;
  for (int i = 0; i < options_.workers; ++i) {
    auto w = std::make_unique<Worker>();
    w->index = i;
    w->segment = shm::Segment::create(layout_.total_bytes, "channel-" + std::to_string(i));
    w->slots = shm::SlotPool(layout_.slab.slot_count);  // at most kRingSlots: a push never finds a full ring
    w->eventfd = shm::make_eventfd();
    if (w->eventfd < 0) throw std::runtime_error("eventfd() failed while creating worker " + std::to_string(i));
    uv_poll_init(loop, &w->poll, w->eventfd);  // started by the supervisor loop
    w->poll.data = w.get();
    uv_timer_init(loop, &w->respawn_timer);
    w->respawn_timer.data = w.get();
    workers_.push_back(std::move(w));
  }
}

void WorkerTable::set_state(Worker& w, WorkerState to) {
  if (!may_become(w.state, to)) {
    // A bug in the pool, not in the worker: loud, but the table stays usable.
    spdlog::error("worker {}: state {} -> {} is not a transition of worker_state.h", w.index, to_string(w.state),
                  to_string(to));
    assert(false);
  }
  spdlog::trace("worker {}: {} -> {}", w.index, to_string(w.state), to_string(to));
  w.state = to;
}

bool WorkerTable::none_left() const {
  for (const auto& w : workers_) {
    if (w->state != WorkerState::kFailed) return false;
  }
  return true;
}

bool WorkerTable::all_reaped() const {
  for (const auto& w : workers_) {
    if (has_process(w->state)) return false;
  }
  return true;
}

bool WorkerTable::all_ready() const {
  for (const auto& w : workers_) {
    if (w->state != WorkerState::kReady) return false;
  }
  return true;
}

void WorkerTable::init_channel(Worker& w) {
  // The previous occupant of the slot has been reaped: nobody else maps this
  // memory now, so it can be rebuilt from scratch.
  std::memset(w.segment.data(), 0, sizeof(shm::ChannelData));
  w.channel = new (w.segment.data()) shm::ChannelData();
  w.requests = std::make_unique<shm::RingProducer<shm::RequestDesc, shm::kRingSlots>>(&w.channel->requests);
  w.completions = std::make_unique<shm::RingConsumer<shm::CompletionDesc, shm::kRingSlots>>(&w.channel->completions);
  // The supervisor never spins: a worker signals the eventfd after every push.
  w.completions->always_want_wake();
  w.slots.reset();
  w.slot_owner.assign(layout_.slab.slot_count, 0);
  w.recycle = Recycle::kNo;
}

void WorkerTable::spawn(Worker& w) {
  init_channel(w);
  WorkerSetup setup;
  setup.slot = w.index;
  setup.cpu = options_.cpus.empty() ? -1 : options_.cpus[w.index % options_.cpus.size()];
  setup.max_batch = options_.max_batch;
  setup.intra_op_threads = options_.intra_op_threads;
  setup.max_batch_delay_us = options_.max_batch_delay_us;
  setup.parent_pid = self_pid_;
  setup.completion_eventfd = w.eventfd;
  setup.log_level = options_.log_level;
  if (options_.naive_weights) setup.naive_model_dir = model_->dir;
  setup.optimize = options_.optimize;
  setup.kernels = options_.kernels;
  // The first generation proves the model runs here (a boot failure stops the
  // pool); a replacement runs the very same module, so it skips that forward()
  // and answers sooner. So a first start may take start_timeout_ms, and a
  // replacement must be ready within the hang deadline.
  const bool first = w.generations++ == 0;
  setup.check_model = first;
  w.start_deadline_ns = monotonic_ns() + int64_t{first ? options_.start_timeout_ms : options_.hang_timeout_ms} * 1000000;
  if (weights_) {
    setup.weights = weights_->segment.data();
    setup.weights_bytes = weights_->segment.size();
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    spdlog::error("fork() failed while spawning worker {}: {}", w.index, std::strerror(errno));
    ++w.boot_crashes;  // back off: fork fails for a reason (memory, pid limit) that takes time to pass
    schedule_respawn(w, 0);
    return;
  }
  if (pid == 0) run_worker_process(setup, w.channel, layout_, model_);  // never returns
  w.pid = pid;
  set_state(w, WorkerState::kStarting);
  mirror_.worker_started(w.index, pid, &w.channel->control);
}

void WorkerTable::note_ready(Worker& w) {
  if (w.state != WorkerState::kStarting ||
      w.channel->control.state.load(std::memory_order_acquire) != static_cast<uint32_t>(shm::BootState::kReady)) {
    return;
  }
  set_state(w, WorkerState::kReady);
  w.boot_crashes = 0;
  mirror_.worker_ready(w.index);
  spdlog::debug("worker {} (pid {}) ready", w.index, w.pid);
}

// SIGKILL; reaped through SIGCHLD like any other exit, and its requests go to
// other workers then. A worker killed before it was ready counts towards its
// slot's crash loop, as a crash before ready would.
void WorkerTable::kill(Worker& w) {
  if (!has_process(w.state) || w.state == WorkerState::kKilled) return;
  ::kill(w.pid, SIGKILL);
  if (w.state == WorkerState::kStarting) ++w.boot_crashes;
  set_state(w, WorkerState::kKilled);
}

void WorkerTable::kill_hung() {
  const int64_t now = monotonic_ns();
  const int64_t limit = int64_t{options_.hang_timeout_ms} * 1000000;
  for (auto& w : workers_) {
    if (w->state == WorkerState::kStarting && now > w->start_deadline_ns) {
      // Hung before ready (stopped, or stuck in its setup): nothing else would notice.
      spdlog::warn("worker {} (pid {}) not ready by its start deadline; killing it", w->index, w->pid);
      kill(*w);
      continue;
    }
    // Every state that has been ready beats: kReady, and the recycles and
    // stops that follow it (a stopping worker that hangs must not hang the pool).
    const WorkerState s = w->state;
    if (s != WorkerState::kReady && s != WorkerState::kRecycling && s != WorkerState::kStopping) continue;
    const int64_t age = now - w->channel->control.heartbeat_ns.load(std::memory_order_relaxed);
    if (age > limit) {
      spdlog::warn("worker {} (pid {}) hung: no heartbeat for {} ms; killing it", w->index, w->pid, age / 1000000);
      kill(*w);
    }
  }
}

// Picks at most one ready worker to recycle, and only while every other slot
// is ready: recycling never takes more than one worker's capacity away, and
// never competes with a crash being repaired. RSS is read on the 100 ms tick
// only (a /proc read); the segment count on every pass, so that a worker
// stops taking work as soon as it reaches max_requests.
void WorkerTable::recycle_due(bool read_rss) {
  if ((options_.max_requests == 0 && options_.max_rss_bytes == 0) || !all_ready()) return;
  for (auto& w : workers_) {
    const uint64_t ran = w->channel->control.segments.load(std::memory_order_relaxed);
    if (options_.max_requests > 0 && ran >= options_.max_requests) {
      return begin_recycle(*w, Recycle::kRequests, "ran " + std::to_string(ran) + " segments (engine.max_requests " +
                                                        std::to_string(options_.max_requests) + ")");
    }
    if (!read_rss || options_.max_rss_bytes == 0) continue;
    const long rss_kb = read_rss_kb(w->pid);
    if (rss_kb > 0 && uint64_t(rss_kb) * 1024 > options_.max_rss_bytes) {
      return begin_recycle(*w, Recycle::kRss, "resident set " + std::to_string(rss_kb / 1024) +
                                                  " MB over engine.max_rss_mb " +
                                                  std::to_string(options_.max_rss_bytes >> 20));
    }
  }
}

void WorkerTable::begin_recycle(Worker& w, Recycle why, const std::string& what) {
  spdlog::info("worker {} (pid {}) {}: recycling it after its {} segment(s) in flight", w.index, w.pid, what,
               w.slots.in_use());
  set_state(w, WorkerState::kRecycling);
  w.recycle = why;
  stop_if_drained(w);
}

// A recycled worker holds no request once its last completion is read: only
// then is it asked to exit, so its exit never re-dispatches anything.
void WorkerTable::stop_if_drained(Worker& w) {
  if (w.state != WorkerState::kRecycling || w.slots.in_use() != 0) return;
  set_state(w, WorkerState::kStopping);
  ask_to_stop(w);
}

void WorkerTable::ask_to_stop(Worker& w) {
  w.channel->control.stop.store(1, std::memory_order_release);
  w.requests->force_wake_consumer();  // it may sleep on its request ring
}

void WorkerTable::begin_shutdown() {
  for (auto& w : workers_) {
    uv_timer_stop(&w->respawn_timer);
    if (w->state == WorkerState::kRespawnWait) set_state(*w, WorkerState::kEmpty);
    if (!has_process(w->state)) continue;
    ask_to_stop(*w);
    if (w->state == WorkerState::kReady || w->state == WorkerState::kRecycling) set_state(*w, WorkerState::kStopping);
  }
}

void WorkerTable::kill_remaining() {
  for (auto& w : workers_) kill(*w);
}

void WorkerTable::close_handles() {
  auto noop = [](uv_handle_t*) {};
  for (auto& w : workers_) {
    uv_close(reinterpret_cast<uv_handle_t*>(&w->poll), noop);
    uv_close(reinterpret_cast<uv_handle_t*>(&w->respawn_timer), noop);
  }
}

}  // namespace corepool::pool
