// ProcessPool::Impl. Two kinds of threads touch it:
//  - submitters (the batch reader, the HTTP loop) call submit()/try_submit()/
//    wait_idle()/stats(): they only touch the state under mu_ (pending_,
//    outstanding_, the mirrors) and wake the loop;
//  - the loop thread owns everything else: the worker table, every ring end on
//    the supervisor side, the in-flight request map, forks and reaping. It
//    holds loop_mu_ in every callback, and try_submit() may take loop_mu_ too
//    (try_lock, never waiting) to dispatch on the caller's thread: an idle
//    pool then starts a request without first waking its loop thread.
// Completions are delivered on the loop thread, outside mu_.
#include "supervisor/pool/process_pool.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "shm/channel.h"
#include "shm/descriptor_check.h"
#include "shm/segment.h"
#include "shm/wake.h"
#include "supervisor/pool/process_memory.h"
#include "worker/shared_weights.h"
#include "worker/worker_process.h"

namespace corepool {
namespace {

enum class SlotState { kStarting, kReady, kDead, kFailed };

// Why a ready worker is being replaced on purpose (engine.max_requests,
// engine.max_rss_mb): it takes no new work, and exits once it holds none.
enum class Recycle { kNo, kRequests, kRss };

std::string exit_text(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    std::string text = "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
    if (sig == SIGKILL) text += ", possibly by the OOM killer";
    return text;
  }
  return "status " + std::to_string(status);
}

// A death the request may have caused: a crash signal or a failing exit. A
// plain SIGKILL or SIGTERM comes from outside (an operator, the OOM killer, a
// chaos test) and convicts nobody; our own hang kill is counted separately.
bool crashed(int status) {
  if (WIFSIGNALED(status)) return WTERMSIG(status) != SIGKILL && WTERMSIG(status) != SIGTERM;
  return WIFEXITED(status) && WEXITSTATUS(status) != 0;
}

}  // namespace

class ProcessPool::Impl {
 public:
  Impl(std::shared_ptr<const LoadedModel> model, ProcessPoolOptions options, Completion on_complete);
  ~Impl();

  void start();
  void submit(SegmentTask task);
  bool try_submit(std::vector<SegmentTask>& tasks);
  void wait_idle();
  void cancel(uint64_t stream);
  int workers() const { return options_.workers; }
  std::vector<int> worker_pids() const;
  bool all_ready() const;
  PoolCounters counters() const;
  ExecutorStats stats() const;

 private:
  // A slot's work counters as other threads see them: the sum over its dead
  // workers plus the live worker's own counters in its channel. `live` is set
  // (under mu_) only while the channel belongs to a worker and will not be
  // memset, so stats() never reads memory being re-initialised, and a dead
  // worker's counts move into the base in the same critical section that
  // stops them being read: the sum never goes down.
  struct SlotWork {
    const shm::WorkerControl* live = nullptr;
    uint64_t busy_ns = 0, batches = 0, segments = 0;
  };

  struct Request {
    uint64_t id = 0;
    SegmentTask task;
    int kills = 0;            // workers that died while holding it
    std::string last_death;   // how the last of them died
    bool cancelled = false;   // its stream was cancelled while it ran: never re-dispatch it
  };

  struct Worker {
    int index = 0;
    SlotState state = SlotState::kDead;
    pid_t pid = 0;
    shm::Segment segment;
    shm::ChannelData* channel = nullptr;
    std::unique_ptr<shm::RingProducer<shm::RequestDesc, shm::kRingSlots>> requests;
    std::unique_ptr<shm::RingConsumer<shm::CompletionDesc, shm::kRingSlots>> completions;
    shm::SlotPool slots{shm::kRingSlots};  // one slab slot per request in flight
    std::vector<uint64_t> slot_owner;       // request id per slab slot; 0 = free
    int eventfd = -1;
    uv_poll_t poll{};
    uv_timer_t respawn_timer{};
    int boot_crashes = 0;               // consecutive crashes before ready
    bool killed_starting = false;       // the last one was killed from outside before ready
    bool kill_sent = false;
    bool has_run = false;               // a worker of this slot has been spawned before
    int64_t start_deadline_ns = 0;      // kStarting past this (CLOCK_MONOTONIC) = hung before ready
    Recycle recycle = Recycle::kNo;     // being replaced on purpose
    bool stop_sent = false;             // asked to exit (recycling)
    bool count_restart = true;          // the next respawn replaces a death, not a recycle
  };

  // Loop-thread steps.
  static Impl* self(uv_handle_t* h) { return static_cast<Impl*>(h->data); }
  void run_loop();
  void on_wake();
  bool take_pending();
  void dispatch();
  void on_eventfd(Worker& w);
  void drain_completions(Worker& w);
  void deliver(SegmentResult&& result);
  void reap();
  void on_exit(Worker& w, int status);
  void requeue_in_flight(Worker& w, const std::string& how, bool crashed);
  void schedule_respawn(Worker& w);
  void check_heartbeats();
  void apply_cancels();
  void check_recycling(bool read_rss);
  void begin_recycle(Worker& w, Recycle why, const std::string& what);
  void stop_if_drained(Worker& w);
  void count_recycle(Worker& w);
  void begin_shutdown();
  void maybe_close();
  void fail_all_queued(const std::string& why);

  // Either thread, before the loop starts or on the loop thread.
  void init_channel(Worker& w);
  void spawn(Worker& w);
  void enqueue_locked(SegmentTask&& task);

  std::shared_ptr<const LoadedModel> model_;
  ProcessPoolOptions options_;
  Completion on_complete_;
  shm::ChannelLayout layout_;
  std::unique_ptr<SharedWeights> weights_;
  std::vector<std::unique_ptr<Worker>> workers_;
  pid_t self_pid_ = 0;

  uv_loop_t loop_{};
  uv_async_t wake_{};
  uv_signal_t sigchld_{};
  uv_timer_t heartbeat_timer_{};
  uv_timer_t shutdown_timer_{};
  std::thread loop_thread_;
  bool shutting_down_ = false;  // loop thread only
  bool closed_ = false;         // loop thread only

  std::deque<Request> queue_;                        // loop thread: waiting for a slot
  std::unordered_map<uint64_t, Request> in_flight_;  // loop thread: id -> request

  mutable std::mutex mu_;
  // Serialises whoever drives the worker table (taken before mu_, never
  // after): the loop thread in each callback, a try_submit() dispatching inline.
  std::mutex loop_mu_;
  std::condition_variable space_cv_;
  std::condition_variable idle_cv_;
  std::condition_variable ready_cv_;
  std::deque<Request> pending_;  // submitted, not yet seen by the loop
  std::vector<uint64_t> cancels_;  // streams cancelled, not yet seen by the loop
  size_t outstanding_ = 0;       // submitted, not yet completed
  size_t depth_ = 0;
  uint64_t next_id_ = 1;
  bool stop_requested_ = false;
  std::string boot_error_;
  std::vector<int> pids_;         // mirror of worker pids for other threads
  std::vector<bool> ready_;       // mirror of readiness
  std::vector<SlotWork> work_;    // per slot, for stats()
  PoolCounters counters_;
};

ProcessPool::Impl::Impl(std::shared_ptr<const LoadedModel> model, ProcessPoolOptions options,
                        Completion on_complete)
    : model_(std::move(model)), options_(std::move(options)), on_complete_(std::move(on_complete)) {
  if (options_.workers < 1) options_.workers = 1;
  if (options_.max_batch < 1) options_.max_batch = 1;
  options_.max_batch = std::min<int>(options_.max_batch, shm::kMaxBatch);
  depth_ = options_.queue_depth > 0 ? options_.queue_depth
                                    : 4 * static_cast<size_t>(options_.workers * options_.max_batch);
  layout_ = shm::ChannelLayout::for_model(model_->config.segment_samples(),
                                          static_cast<uint32_t>(model_->config.item_floats()),
                                          static_cast<uint32_t>(model_->config.labels.size()));
  self_pid_ = ::getpid();
  pids_.assign(options_.workers, 0);
  ready_.assign(options_.workers, false);
  work_.assign(options_.workers, SlotWork{});
}

void ProcessPool::Impl::start() {
  shm::sweep_dead_segments();
  // One read-only copy of the weights before any worker exists; the module is
  // rebound to it, so every fork inherits views, not copies.
  if (!options_.naive_weights) weights_ = std::make_unique<SharedWeights>(share_weights(*model_));
  if (uv_loop_init(&loop_) != 0) throw std::runtime_error("uv_loop_init failed");
  loop_.data = this;
  uv_async_init(&loop_, &wake_, [](uv_async_t* h) {
    Impl* impl = self(reinterpret_cast<uv_handle_t*>(h));
    std::lock_guard<std::mutex> loop(impl->loop_mu_);
    impl->on_wake();
  });
  wake_.data = this;
  uv_signal_init(&loop_, &sigchld_);
  sigchld_.data = this;
  uv_signal_start(&sigchld_, [](uv_signal_t* h, int) {
    Impl* impl = self(reinterpret_cast<uv_handle_t*>(h));
    std::lock_guard<std::mutex> loop(impl->loop_mu_);
    impl->reap();
  }, SIGCHLD);
  uv_timer_init(&loop_, &heartbeat_timer_);
  heartbeat_timer_.data = this;
  uv_timer_start(&heartbeat_timer_, [](uv_timer_t* h) {
    Impl* impl = self(reinterpret_cast<uv_handle_t*>(h));
    std::lock_guard<std::mutex> loop(impl->loop_mu_);
    impl->check_heartbeats();
    impl->check_recycling(true);
  },
                 100, 100);
  uv_timer_init(&loop_, &shutdown_timer_);
  shutdown_timer_.data = this;
  for (int i = 0; i < options_.workers; ++i) {
    auto w = std::make_unique<Worker>();
    w->index = i;
    w->segment = shm::Segment::create(layout_.total_bytes, "channel-" + std::to_string(i));
    w->eventfd = shm::make_eventfd();
    if (w->eventfd < 0) throw std::runtime_error("eventfd() failed while creating worker " + std::to_string(i));
    uv_poll_init(&loop_, &w->poll, w->eventfd);
    w->poll.data = w.get();
    uv_timer_init(&loop_, &w->respawn_timer);
    w->respawn_timer.data = w.get();
    workers_.push_back(std::move(w));
  }
  for (auto& w : workers_) {
    uv_poll_start(&w->poll, UV_READABLE, [](uv_poll_t* h, int, int) {
      auto* worker = static_cast<Worker*>(h->data);
      auto* impl = static_cast<Impl*>(h->loop->data);
      std::lock_guard<std::mutex> loop(impl->loop_mu_);
      impl->on_eventfd(*worker);
    });
  }
  loop_thread_ = std::thread([this] { run_loop(); });

  std::unique_lock<std::mutex> lock(mu_);
  const bool done = ready_cv_.wait_for(lock, std::chrono::milliseconds(options_.start_timeout_ms), [this] {
    return !boot_error_.empty() || std::all_of(ready_.begin(), ready_.end(), [](bool r) { return r; });
  });
  if (!boot_error_.empty()) throw ModelError(boot_error_);
  if (!done) throw std::runtime_error("workers not ready after " + std::to_string(options_.start_timeout_ms) + " ms");
}

void ProcessPool::Impl::init_channel(Worker& w) {
  // The previous occupant of the slot has been reaped: nobody else maps this
  // memory now, so it can be rebuilt from scratch.
  std::memset(w.segment.data(), 0, sizeof(shm::ChannelData));
  w.channel = new (w.segment.data()) shm::ChannelData();
  w.requests = std::make_unique<shm::RingProducer<shm::RequestDesc, shm::kRingSlots>>(&w.channel->requests);
  w.completions = std::make_unique<shm::RingConsumer<shm::CompletionDesc, shm::kRingSlots>>(&w.channel->completions);
  // The supervisor never spins: a worker signals the eventfd after every push.
  w.completions->always_want_wake();
  w.slots.reset();
  w.slot_owner.assign(shm::kRingSlots, 0);
  w.kill_sent = false;
  w.recycle = Recycle::kNo;
  w.stop_sent = false;
}

void ProcessPool::Impl::spawn(Worker& w) {
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
  // The first generation proves the model runs here (a boot failure stops the
  // pool); a replacement runs the very same module, so it skips that forward()
  // and answers sooner.
  setup.check_model = !w.has_run;
  // A first start runs a forward() and may take start_timeout_ms; a
  // replacement runs none and must be ready within the hang deadline.
  w.start_deadline_ns = monotonic_ns() + int64_t{w.has_run ? options_.hang_timeout_ms : options_.start_timeout_ms} * 1000000;
  w.has_run = true;
  if (weights_) {
    setup.weights = weights_->segment.data();
    setup.weights_bytes = weights_->segment.size();
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    spdlog::error("fork() failed while spawning worker {}: {}", w.index, std::strerror(errno));
    w.state = SlotState::kDead;
    ++w.boot_crashes;  // back off: fork fails for a reason (memory, pid limit) that takes time to pass
    schedule_respawn(w);
    return;
  }
  if (pid == 0) run_worker_process(setup, w.channel, layout_, model_);  // never returns
  w.pid = pid;
  w.state = SlotState::kStarting;
  std::lock_guard<std::mutex> lock(mu_);
  pids_[w.index] = pid;
  ready_[w.index] = false;
  work_[w.index].live = &w.channel->control;
}

void ProcessPool::Impl::run_loop() {
  // Every fork happens on this thread, first ones included: PR_SET_PDEATHSIG
  // fires when the *thread* that forked a worker ends, and this thread lives
  // exactly as long as the pool.
  {
    std::lock_guard<std::mutex> loop(loop_mu_);
    for (auto& w : workers_) spawn(*w);
  }
  uv_run(&loop_, UV_RUN_DEFAULT);
}

// Requires loop_mu_. Returns whether a stop was requested.
bool ProcessPool::Impl::take_pending() {
  std::lock_guard<std::mutex> lock(mu_);
  while (!pending_.empty()) {
    queue_.push_back(std::move(pending_.front()));
    pending_.pop_front();
  }
  return stop_requested_;
}

void ProcessPool::Impl::on_wake() {
  const bool stop = take_pending();
  apply_cancels();
  if (stop && !shutting_down_) begin_shutdown();
  dispatch();
}

void ProcessPool::Impl::dispatch() {
  std::vector<Worker*> pushed;
  while (!queue_.empty()) {
    // Least-loaded live worker with a free slot.
    Worker* best = nullptr;
    for (auto& w : workers_) {
      const bool live = w->state == SlotState::kReady || w->state == SlotState::kStarting;
      if (live && !w->kill_sent && w->recycle == Recycle::kNo && w->slots.in_use() < w->slots.capacity() &&
          (!best || w->slots.in_use() < best->slots.in_use())) {
        best = w.get();
      }
    }
    if (!best) break;
    Request req = std::move(queue_.front());
    queue_.pop_front();
    const uint32_t slot = *best->slots.acquire();  // a free slot exists: checked above
    char* dst = static_cast<char*>(best->segment.data()) + layout_.slab_offset + layout_.slab.offset_of(slot);
    const size_t n = std::min<size_t>(req.task.samples.size(), layout_.result_offset / sizeof(float));
    std::memcpy(dst, req.task.samples.data(), n * sizeof(float));
    best->slot_owner[slot] = req.id;
    // The worker checks the size against the kind before it reads the slot; a
    // task too big for the slot is copied short and fails that check.
    const uint32_t flags = (req.kills > 0 ? shm::kRunAlone : 0u) |
                           (req.task.input == TaskInput::kModelInput ? shm::kModelInput : 0u);
    const auto floats = static_cast<uint32_t>(std::min<size_t>(req.task.samples.size(), UINT32_MAX));
    // The ring has as many slots as the slab, so with a free slab slot a push
    // can only fail if the worker wrote a head from the future into its ring.
    if (!best->requests->try_push({req.id, slot, floats, flags, 0u})) {
      spdlog::error("worker {} (pid {}) corrupted its request ring; killing it", best->index, best->pid);
      best->slot_owner[slot] = 0;
      best->slots.release(slot);
      ::kill(best->pid, SIGKILL);
      best->kill_sent = true;  // takes no more work; its requests come back when it is reaped
      queue_.push_front(std::move(req));
      continue;
    }
    in_flight_.emplace(req.id, std::move(req));
    if (std::find(pushed.begin(), pushed.end(), best) == pushed.end()) pushed.push_back(best);
  }
  for (Worker* w : pushed) w->requests->wake_consumer();
  const bool none_left = std::all_of(workers_.begin(), workers_.end(),
                                     [](const auto& w) { return w->state == SlotState::kFailed; });
  if (none_left && !queue_.empty()) fail_all_queued("no worker left: every worker failed to start");
}

void ProcessPool::Impl::on_eventfd(Worker& w) {
  shm::drain_eventfd(w.eventfd);
  if (w.state == SlotState::kStarting &&
      w.channel->control.state.load(std::memory_order_acquire) == static_cast<uint32_t>(shm::WorkerState::kReady)) {
    w.state = SlotState::kReady;
    w.boot_crashes = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_[w.index] = true;
    }
    ready_cv_.notify_all();
    spdlog::debug("worker {} (pid {}) ready", w.index, w.pid);
  }
  drain_completions(w);
  stop_if_drained(w);
  check_recycling(false);
  dispatch();
}

void ProcessPool::Impl::drain_completions(Worker& w) {
  if (!w.completions) return;
  while (shm::CompletionDesc* c = w.completions->front()) {
    const shm::CompletionDesc done = *c;
    w.completions->pop();
    if (done.slot >= shm::kRingSlots || w.slot_owner[done.slot] != done.request) {
      std::lock_guard<std::mutex> lock(mu_);
      ++counters_.duplicates;  // a late answer for a request already re-dispatched
      continue;
    }
    w.slot_owner[done.slot] = 0;
    w.slots.release(done.slot);
    auto it = in_flight_.find(done.request);
    if (it == in_flight_.end()) continue;
    // The worker's memory may be corrupt: decode_completion reads only inside the slot.
    const char* slab = static_cast<const char*>(w.segment.data()) + layout_.slab_offset;
    shm::DecodedCompletion decoded = shm::decode_completion(
        done, slab, layout_, static_cast<uint32_t>(model_->config.labels.size()));
    SegmentResult r{it->second.task.stream, it->second.task.index, std::move(decoded.scores),
                    std::move(decoded.error)};
    if (!decoded.problem.empty()) {
      r.error = "worker " + std::to_string(w.index) + " sent a corrupt completion: " + decoded.problem;
    }
    in_flight_.erase(it);
    deliver(std::move(r));
  }
  if (w.completions->corrupt() && !w.kill_sent && w.pid > 0) {
    spdlog::error("worker {} (pid {}) corrupted its completion ring; killing it", w.index, w.pid);
    ::kill(w.pid, SIGKILL);
    w.kill_sent = true;  // reaped through SIGCHLD; its requests go to other workers
  }
}

void ProcessPool::Impl::deliver(SegmentResult&& result) {
  on_complete_(std::move(result));
  std::lock_guard<std::mutex> lock(mu_);
  --outstanding_;
  space_cv_.notify_all();
  if (outstanding_ == 0) idle_cv_.notify_all();
}

void ProcessPool::Impl::reap() {
  // Only our own workers: waitpid(-1) would steal the exit status of children
  // that other code in this process is waiting for.
  for (auto& w : workers_) {
    if (w->pid <= 0) continue;
    int status = 0;
    const pid_t r = ::waitpid(w->pid, &status, WNOHANG);
    if (r == w->pid) on_exit(*w, status);
  }
  if (shutting_down_) maybe_close();
}

void ProcessPool::Impl::on_exit(Worker& w, int status) {
  std::string how = exit_text(status);
  if (w.kill_sent) how += " after missing its heartbeat deadline";
  const bool was_ready = w.state == SlotState::kReady;
  drain_completions(w);  // answers it finished before dying are good answers
  {
    std::lock_guard<std::mutex> lock(mu_);
    pids_[w.index] = 0;
    ready_[w.index] = false;
    // The worker is gone, its counters final; the channel is memset at respawn.
    SlotWork& work = work_[w.index];
    const shm::WorkerControl& c = w.channel->control;
    work.busy_ns += c.busy_ns.load(std::memory_order_relaxed);
    work.batches += c.batches.load(std::memory_order_relaxed);
    work.segments += c.segments.load(std::memory_order_relaxed);
    work.live = nullptr;
  }
  w.pid = 0;
  if (w.recycle != Recycle::kNo && WIFEXITED(status) && WEXITSTATUS(status) == kWorkerExitOk && !shutting_down_) {
    count_recycle(w);
    return;
  }
  if (shutting_down_) {
    w.state = SlotState::kDead;
    requeue_in_flight(w, how, false);
    return;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kWorkerExitBootFailure) {
    spdlog::error("worker {} could not start ({}); not respawning it", w.index, how);
    w.state = SlotState::kFailed;
    std::lock_guard<std::mutex> lock(mu_);
    if (boot_error_.empty()) boot_error_ = "worker " + std::to_string(w.index) + " could not start: see its log above";
    ready_cv_.notify_all();
  } else {
    spdlog::warn("worker {} {}; {} request(s) in flight go to other workers", w.index, how, w.slots.in_use());
    w.state = SlotState::kDead;
    // Only a crash before ready counts towards a crash loop: a SIGKILL from
    // outside (an operator, the OOM killer, a chaos test) says nothing about
    // the worker, so it costs a short pause, never the slot.
    if (!was_ready && (crashed(status) || w.kill_sent)) ++w.boot_crashes;
    w.killed_starting = !was_ready && !crashed(status) && !w.kill_sent;
  }
  requeue_in_flight(w, how, crashed(status) || w.kill_sent);
  if (w.state == SlotState::kDead) schedule_respawn(w);
  dispatch();
}

void ProcessPool::Impl::requeue_in_flight(Worker& w, const std::string& how, bool crashed) {
  // At-least-once dispatch: everything the dead worker held goes back to the
  // front of the queue, in its original order. If the worker crashed, the batch
  // it was running is suspect: a request that has now been running in
  // `poison_kills` crashed workers is answered with an error instead.
  std::vector<uint64_t> suspects;
  if (crashed) {
    const uint32_t n = std::min<uint32_t>(w.channel->control.running_count.load(std::memory_order_acquire), shm::kMaxBatch);
    for (uint32_t i = 0; i < n; ++i) suspects.push_back(w.channel->control.running[i].load(std::memory_order_relaxed));
  }
  std::vector<uint64_t> ids;
  for (uint64_t id : w.slot_owner) {
    if (id != 0) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end(), std::greater<>());
  for (uint64_t id : ids) {
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) continue;
    Request req = std::move(it->second);
    in_flight_.erase(it);
    if (req.cancelled) {  // its request is answered already (deadline): nothing to run it for
      deliver({req.task.stream, req.task.index, {}, "cancelled: the request's deadline passed"});
      continue;
    }
    const bool suspect = std::find(suspects.begin(), suspects.end(), id) != suspects.end();
    if (suspect) {
      req.kills += 1;
      req.last_death = how;
    }
    if (suspect && !shutting_down_ && req.kills >= options_.poison_kills) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++counters_.poisoned;
      }
      spdlog::error("segment {} of stream {} killed {} workers (last {}): failing it as poison input",
                    req.task.index, req.task.stream, req.kills, how);
      deliver({req.task.stream, req.task.index, {},
               "poison input: this segment was being processed by " + std::to_string(req.kills) +
                   " workers that died (last " + how + ")"});
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counters_.redispatched;
    }
    queue_.push_front(std::move(req));
  }
  w.slot_owner.assign(shm::kRingSlots, 0);
  w.slots.reset();
}

void ProcessPool::Impl::schedule_respawn(Worker& w) {
  // A worker that keeps dying before it is ready is crash-looping: back off
  // exponentially (100 ms .. 10 s) and give the slot up after 10 tries.
  if (w.boot_crashes >= 10) {
    spdlog::error("worker {} died {} times before becoming ready; giving the slot up", w.index, w.boot_crashes);
    w.state = SlotState::kFailed;
    return;
  }
  const uint64_t delay = w.boot_crashes > 0 ? std::min<uint64_t>(10000, 100ull << (w.boot_crashes - 1))
                         : w.killed_starting ? 100
                                             : 0;
  uv_timer_start(&w.respawn_timer, [](uv_timer_t* h) {
    auto* worker = static_cast<Worker*>(h->data);
    auto* impl = static_cast<Impl*>(h->loop->data);
    std::lock_guard<std::mutex> loop(impl->loop_mu_);
    if (impl->shutting_down_ || worker->state != SlotState::kDead) return;
    if (worker->count_restart) {
      std::lock_guard<std::mutex> lock(impl->mu_);
      ++impl->counters_.restarts;
    }
    worker->count_restart = true;
    impl->spawn(*worker);
    impl->dispatch();
  }, delay, 0);
}

void ProcessPool::Impl::check_heartbeats() {
  const int64_t now = monotonic_ns();
  const int64_t limit = int64_t{options_.hang_timeout_ms} * 1000000;
  for (auto& w : workers_) {
    if (w->state == SlotState::kStarting && !w->kill_sent && w->pid > 0 && now > w->start_deadline_ns) {
      // Hung before ready (stopped, or stuck in its setup): nothing else would notice.
      spdlog::warn("worker {} (pid {}) not ready by its start deadline; killing it", w->index, w->pid);
      ::kill(w->pid, SIGKILL);
      w->kill_sent = true;
      continue;
    }
    if (w->state != SlotState::kReady || w->kill_sent || w->pid <= 0) continue;
    const int64_t age = now - w->channel->control.heartbeat_ns.load(std::memory_order_relaxed);
    if (age > limit) {
      spdlog::warn("worker {} (pid {}) hung: no heartbeat for {} ms; killing it", w->index, w->pid, age / 1000000);
      ::kill(w->pid, SIGKILL);
      w->kill_sent = true;  // reaped through SIGCHLD like any other exit
    }
  }
}

// The loop's share of cancel(): queued tasks of a cancelled stream complete
// now with an error (freeing their queue space); tasks already in a worker
// run to the end but are marked, so that a death does not re-dispatch them.
void ProcessPool::Impl::apply_cancels() {
  std::vector<uint64_t> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams.swap(cancels_);
  }
  if (streams.empty()) return;
  auto cancelled = [&](const Request& r) {
    return std::find(streams.begin(), streams.end(), r.task.stream) != streams.end();
  };
  for (auto& [id, req] : in_flight_) req.cancelled = req.cancelled || cancelled(req);
  std::deque<Request> kept;
  std::vector<Request> dropped;
  for (Request& r : queue_) {
    if (cancelled(r)) {
      dropped.push_back(std::move(r));
    } else {
      kept.push_back(std::move(r));
    }
  }
  queue_.swap(kept);
  {
    std::lock_guard<std::mutex> lock(mu_);
    counters_.cancelled += dropped.size();
  }
  for (Request& r : dropped) deliver({r.task.stream, r.task.index, {}, "cancelled: the request's deadline passed"});
}

// Picks at most one ready worker to recycle, and only while every other slot
// is ready: recycling never takes more than one worker's capacity away, and
// never competes with a crash being repaired. RSS is read on the 100 ms timer
// only (a /proc read); the segment count after every completion too, so that
// a worker stops taking work as soon as it reaches max_requests.
void ProcessPool::Impl::check_recycling(bool read_rss) {
  if ((options_.max_requests == 0 && options_.max_rss_bytes == 0) || shutting_down_) return;
  for (auto& w : workers_) {
    if (w->state != SlotState::kReady || w->recycle != Recycle::kNo || w->kill_sent) return;
  }
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

void ProcessPool::Impl::begin_recycle(Worker& w, Recycle why, const std::string& what) {
  spdlog::info("worker {} (pid {}) {}: recycling it after its {} segment(s) in flight", w.index, w.pid, what,
               w.slots.in_use());
  w.recycle = why;
  stop_if_drained(w);
}

// A recycled worker holds no request once its last completion is read: only
// then is it asked to exit, so its exit never re-dispatches anything.
void ProcessPool::Impl::stop_if_drained(Worker& w) {
  if (w.recycle == Recycle::kNo || w.stop_sent || w.pid <= 0 || w.slots.in_use() != 0) return;
  w.stop_sent = true;
  w.channel->control.stop.store(1, std::memory_order_release);
  w.requests->force_wake_consumer();
}

// on_exit() of a recycled worker that exited 0 as asked: replaced at once, as
// a recycle, not a restart.
void ProcessPool::Impl::count_recycle(Worker& w) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++(w.recycle == Recycle::kRequests ? counters_.recycled_max_requests : counters_.recycled_max_rss);
  }
  spdlog::info("worker {} recycled; starting its replacement", w.index);
  w.state = SlotState::kDead;
  requeue_in_flight(w, "recycled", false);  // empty: it was drained before the stop
  w.count_restart = false;
  schedule_respawn(w);
  dispatch();
}

void ProcessPool::Impl::fail_all_queued(const std::string& why) {
  while (!queue_.empty()) {
    Request req = std::move(queue_.front());
    queue_.pop_front();
    deliver({req.task.stream, req.task.index, {}, why});
  }
}

void ProcessPool::Impl::begin_shutdown() {
  shutting_down_ = true;
  for (auto& w : workers_) {
    uv_timer_stop(&w->respawn_timer);
    if (w->pid <= 0) continue;
    w->channel->control.stop.store(1, std::memory_order_release);
    w->requests->force_wake_consumer();
  }
  // Workers notice the stop within their 100 ms wait; kill any that do not.
  uv_timer_start(&shutdown_timer_, [](uv_timer_t* h) {
    auto* impl = self(reinterpret_cast<uv_handle_t*>(h));
    std::lock_guard<std::mutex> loop(impl->loop_mu_);
    for (auto& w : impl->workers_) {
      if (w->pid > 0) ::kill(w->pid, SIGKILL);
    }
  }, 5000, 0);
  maybe_close();
}

void ProcessPool::Impl::maybe_close() {
  if (closed_) return;
  for (auto& w : workers_) {
    if (w->pid > 0) return;
  }
  closed_ = true;
  auto noop = [](uv_handle_t*) {};
  uv_close(reinterpret_cast<uv_handle_t*>(&wake_), noop);
  uv_close(reinterpret_cast<uv_handle_t*>(&sigchld_), noop);
  uv_close(reinterpret_cast<uv_handle_t*>(&heartbeat_timer_), noop);
  uv_close(reinterpret_cast<uv_handle_t*>(&shutdown_timer_), noop);
  for (auto& w : workers_) {
    uv_close(reinterpret_cast<uv_handle_t*>(&w->poll), noop);
    uv_close(reinterpret_cast<uv_handle_t*>(&w->respawn_timer), noop);
  }
}

// Caller holds mu_ and has counted the task in outstanding_.
void ProcessPool::Impl::enqueue_locked(SegmentTask&& task) {
  Request req;
  req.id = next_id_++;
  req.task = std::move(task);
  pending_.push_back(std::move(req));
}

void ProcessPool::Impl::submit(SegmentTask task) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    space_cv_.wait(lock, [this] { return outstanding_ < depth_; });
    ++outstanding_;
    enqueue_locked(std::move(task));
  }
  uv_async_send(&wake_);
}

bool ProcessPool::Impl::try_submit(std::vector<SegmentTask>& tasks) {
  // Taken first (lock order), but only if free: a busy loop thread is about
  // to look at pending_ anyway, and this caller must never wait.
  std::unique_lock<std::mutex> loop(loop_mu_, std::try_to_lock);
  bool stop = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (outstanding_ + tasks.size() > depth_) return false;
    outstanding_ += tasks.size();
    for (auto& t : tasks) enqueue_locked(std::move(t));
    stop = stop_requested_;
  }
  tasks.clear();
  // Inline: move what is pending into the queue and push it to the rings from
  // here. Never while stopping: shutting down touches libuv handles, which
  // only the loop thread may.
  if (loop.owns_lock() && !stop && !shutting_down_ && !closed_) {
    take_pending();
    dispatch();
    return true;
  }
  if (loop.owns_lock()) loop.unlock();  // unlocking a lock not taken throws EPERM
  uv_async_send(&wake_);  // never blocks: it only writes to the loop's eventfd
  return true;
}

void ProcessPool::Impl::cancel(uint64_t stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_requested_) return;
    cancels_.push_back(stream);
  }
  uv_async_send(&wake_);
}

void ProcessPool::Impl::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return outstanding_ == 0; });
}

ProcessPool::Impl::~Impl() {
  if (loop_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_requested_ = true;
    }
    uv_async_send(&wake_);
    loop_thread_.join();
  } else if (loop_.data == this) {
    // start() failed before the loop thread ran: stop whatever was forked and
    // close whichever handles were initialised.
    for (auto& w : workers_) {
      if (w->pid > 0) {
        ::kill(w->pid, SIGKILL);
        ::waitpid(w->pid, nullptr, 0);
      }
    }
    uv_walk(&loop_, [](uv_handle_t* h, void*) {
      if (!uv_is_closing(h)) uv_close(h, nullptr);
    }, nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
  }
  if (loop_.data == this) uv_loop_close(&loop_);
  for (auto& w : workers_) {
    if (w->eventfd >= 0) ::close(w->eventfd);
  }
}

std::vector<int> ProcessPool::Impl::worker_pids() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pids_;
}

bool ProcessPool::Impl::all_ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::all_of(ready_.begin(), ready_.end(), [](bool r) { return r; });
}

PoolCounters ProcessPool::Impl::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

ExecutorStats ProcessPool::Impl::stats() const {
  ExecutorStats s;
  std::lock_guard<std::mutex> lock(mu_);
  s.outstanding = outstanding_;
  s.depth = depth_;
  s.pids = pids_;
  s.all_ready = std::all_of(ready_.begin(), ready_.end(), [](bool r) { return r; });
  s.restarts = counters_.restarts;
  s.redispatched = counters_.redispatched;
  s.poisoned = counters_.poisoned;
  s.cancelled = counters_.cancelled;
  s.recycled_max_requests = counters_.recycled_max_requests;
  s.recycled_max_rss = counters_.recycled_max_rss;
  for (const SlotWork& work : work_) {
    uint64_t busy_ns = work.busy_ns;
    if (work.live) {
      busy_ns += work.live->busy_ns.load(std::memory_order_relaxed);
      s.batches += work.live->batches.load(std::memory_order_relaxed);
      s.segments += work.live->segments.load(std::memory_order_relaxed);
    }
    s.batches += work.batches;
    s.segments += work.segments;
    s.busy_seconds.push_back(static_cast<double>(busy_ns) / 1e9);
  }
  return s;
}

ProcessPool::ProcessPool(std::shared_ptr<const LoadedModel> model, ProcessPoolOptions options, Completion on_complete)
    : impl_(std::make_unique<Impl>(std::move(model), std::move(options), std::move(on_complete))) {
  impl_->start();
}

ProcessPool::~ProcessPool() {
  if (impl_) impl_->wait_idle();
}

void ProcessPool::submit(SegmentTask task) { impl_->submit(std::move(task)); }
bool ProcessPool::try_submit(std::vector<SegmentTask>& tasks) { return impl_->try_submit(tasks); }
ExecutorStats ProcessPool::stats() const { return impl_->stats(); }
void ProcessPool::wait_idle() { impl_->wait_idle(); }
void ProcessPool::cancel(uint64_t stream) { impl_->cancel(stream); }
int ProcessPool::workers() const { return impl_->workers(); }
std::vector<int> ProcessPool::worker_pids() const { return impl_->worker_pids(); }
bool ProcessPool::all_ready() const { return impl_->all_ready(); }
PoolCounters ProcessPool::counters() const { return impl_->counters(); }

}  // namespace corepool
