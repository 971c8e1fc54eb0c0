// SupervisorLoop: libuv's callbacks in, one supervision pass out. supervise()
// is the whole supervision order; every other function here is either a
// step of it or wiring. Loop thread only, except wake() and try_submit().
#include "supervisor/pool/supervisor_loop.h"

#include <signal.h>

#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

#include "shm/wake.h"

namespace corepool::pool {
namespace {

constexpr uint64_t kTickMs = 100;              // heartbeat and RSS checks
constexpr uint64_t kShutdownGraceMs = 5000;    // workers see a stop within their 100 ms wait

SupervisorLoop* self(uv_loop_t* loop) { return static_cast<SupervisorLoop*>(loop->data); }

// The loop this thread holds loop_mu_ of, while it does: completions it
// delivers then may call try_submit (Executor::submits_from_completions).
thread_local const void* t_in_pass = nullptr;

// Marks the thread as inside a pass of `loop` for its lifetime.
struct InPass {
  explicit InPass(const void* loop) : outer(std::exchange(t_in_pass, loop)) {}
  ~InPass() { t_in_pass = outer; }
  const void* outer;
};

}  // namespace

// One pass of supervision, gunicorn-arbiter style. libuv decides when a pass
// runs; this function alone decides what it does, and in which order:
// answers are read before the dead are reaped (a dying worker's finished
// answers are good answers), the dead are reaped before anyone is judged
// hung, and new workers are forked only after all of that, so a slot is
// never filled twice. Dispatch comes last, to whoever is left.
void SupervisorLoop::supervise(unsigned events) {
  if (events & kWoken) take_submissions();         // new requests, cancels, a stop request
  read_completions();                              // answers, workers now ready, drained recycles
  if (events & kChildExited) reap_exited();        // re-dispatch the dead's requests, schedule respawns
  kill_hung(events);                               // heartbeat / start / shutdown deadlines: SIGKILL
  recycle_due(events);                             // one worker past max_requests / max_rss at a time
  bring_to_target_size();                          // fork into slots whose back-off is over
  dispatch_added();                                // the queue to the least-loaded workers
  close_when_all_reaped();                         // shutting down: the last worker is gone
}

void SupervisorLoop::take_submissions() {
  const bool stop = dispatcher_.take_pending();
  dispatcher_.apply_cancels(submissions_.take_cancels());
  if (stop && !shutting_down_) begin_shutdown();
}

void SupervisorLoop::read_completions() {
  for (auto& w : table_.slots()) {
    if (!has_process(w->state)) continue;
    table_.note_ready(*w);
    if (!dispatcher_.drain_completions(*w) && w->state != WorkerState::kKilled) {
      spdlog::error("worker {} (pid {}) corrupted its completion ring; killing it", w->index, w->pid);
      table_.kill(*w);  // reaped through SIGCHLD; its requests go to other workers
    }
    table_.stop_if_drained(*w);
  }
}

void SupervisorLoop::reap_exited() {
  for (auto& w : table_.slots()) {
    int status = 0;
    if (!table_.reap(*w, status)) continue;
    dispatcher_.drain_completions(*w);  // answers it finished before dying are good answers
    const ExitVerdict verdict = table_.settle_exit(*w, status, shutting_down_);
    dispatcher_.requeue_in_flight(*w, verdict, shutting_down_);
  }
}

void SupervisorLoop::kill_hung(unsigned events) {
  if (events & kShutdownDeadline) table_.kill_remaining();
  if (events & kTick) table_.kill_hung();
}

void SupervisorLoop::recycle_due(unsigned events) {
  if (!shutting_down_) table_.recycle_due((events & kTick) != 0);  // RSS is a /proc read: on the tick only
}

void SupervisorLoop::bring_to_target_size() {
  if (!shutting_down_) table_.spawn_due();
}

void SupervisorLoop::dispatch() { dispatcher_.dispatch(table_); }

// Completions delivered in this pass (or by dispatch itself: cancels, a pool
// with no worker left) may have added tasks: a stateful model's call goes on
// from its results, and dispatching those now spares the feeding thread's hop.
void SupervisorLoop::dispatch_added() {
  if (std::exchange(added_in_pass_, false)) take_submissions();
  dispatch();
  while (std::exchange(added_in_pass_, false)) {
    take_submissions();
    dispatch();
  }
}

void SupervisorLoop::close_when_all_reaped() {
  if (!shutting_down_ || closed_ || !table_.all_reaped()) return;
  closed_ = true;
  auto noop = [](uv_handle_t*) {};
  uv_close(reinterpret_cast<uv_handle_t*>(&wake_), noop);
  uv_close(reinterpret_cast<uv_handle_t*>(&sigchld_), noop);
  uv_close(reinterpret_cast<uv_handle_t*>(&heartbeat_timer_), noop);
  uv_close(reinterpret_cast<uv_handle_t*>(&shutdown_timer_), noop);
  table_.close_handles();
}

void SupervisorLoop::begin_shutdown() {
  shutting_down_ = true;
  table_.begin_shutdown();
  uv_timer_start(&shutdown_timer_, [](uv_timer_t* h) { self(h->loop)->on_event(kShutdownDeadline); },
                 kShutdownGraceMs, 0);
}

// ---- wiring ---------------------------------------------------------------

SupervisorLoop::SupervisorLoop(WorkerTable& table, Dispatcher& dispatcher, Submissions& submissions)
    : table_(table), dispatcher_(dispatcher), submissions_(submissions) {}

void SupervisorLoop::on_event(unsigned events) {
  std::lock_guard<std::mutex> loop(loop_mu_);
  const InPass in_pass(this);
  supervise(events);
}

void SupervisorLoop::start(const SharedWeights* weights) {
  if (uv_loop_init(&loop_) != 0) throw std::runtime_error("uv_loop_init failed");
  loop_ready_ = true;
  loop_.data = this;
  uv_async_init(&loop_, &wake_, [](uv_async_t* h) { self(h->loop)->on_event(kWoken); });
  uv_signal_init(&loop_, &sigchld_);
  uv_signal_start(&sigchld_, [](uv_signal_t* h, int) { self(h->loop)->on_event(kChildExited); }, SIGCHLD);
  uv_timer_init(&loop_, &heartbeat_timer_);
  uv_timer_start(&heartbeat_timer_, [](uv_timer_t* h) { self(h->loop)->on_event(kTick); }, kTickMs, kTickMs);
  uv_timer_init(&loop_, &shutdown_timer_);
  table_.create(&loop_, weights, [](uv_timer_t* h) { self(h->loop)->on_event(kRespawnTimer); });
  for (auto& w : table_.slots()) {
    uv_poll_start(&w->poll, UV_READABLE, [](uv_poll_t* h, int, int) {
      shm::drain_eventfd(static_cast<Worker*>(h->data)->eventfd);
      self(h->loop)->on_event(kCompletions);
    });
  }
  thread_ = std::thread([this] { run(); });
}

void SupervisorLoop::run() {
  // Every fork happens on this thread, first ones included: PR_SET_PDEATHSIG
  // fires when the *thread* that forked a worker ends, and this thread lives
  // exactly as long as the pool. (The first pass forks every slot.)
  on_event(kStarted);
  uv_run(&loop_, UV_RUN_DEFAULT);
}

void SupervisorLoop::wake() { uv_async_send(&wake_); }  // never blocks: it only writes to the loop's eventfd

bool SupervisorLoop::try_submit(std::vector<SegmentTask>& tasks) {
  if (t_in_pass == this) {  // a completion inside a pass: loop_mu_ is this thread's already
    // They go to the worker whose completion this is (Dispatcher::target).
    if (!submissions_.try_add(tasks, dispatcher_.delivering())) return false;
    added_in_pass_ = true;  // dispatch_added() takes them before the pass ends
    return true;
  }
  // Taken first (lock order), but only if free: a busy loop thread is about
  // to look at the submissions anyway, and this caller must never wait.
  std::unique_lock<std::mutex> loop(loop_mu_, std::try_to_lock);
  if (!submissions_.try_add(tasks)) return false;
  // Inline: an idle pool starts the request without first waking its loop
  // thread. Only queue and rings: never while stopping (shutting down touches
  // libuv handles, which only the loop thread may), never reaping or forking.
  if (loop.owns_lock() && !submissions_.stop_requested() && !shutting_down_ && !closed_) {
    const InPass in_pass(this);
    dispatcher_.take_pending();
    dispatcher_.dispatch(table_);
    while (std::exchange(added_in_pass_, false)) {
      dispatcher_.take_pending();
      dispatcher_.dispatch(table_);
    }
    return true;
  }
  if (loop.owns_lock()) loop.unlock();  // unlocking a lock not taken throws EPERM
  wake();
  return true;
}

SupervisorLoop::~SupervisorLoop() {
  if (thread_.joinable()) {
    submissions_.request_stop();
    wake();
    thread_.join();
  } else if (loop_ready_) {
    close_loop_without_thread();
  }
  if (loop_ready_) uv_loop_close(&loop_);
}

// start() failed before the loop thread ran, so nothing was forked (forks
// happen on that thread only): close whichever handles were initialised.
void SupervisorLoop::close_loop_without_thread() {
  uv_walk(&loop_, [](uv_handle_t* h, void*) {
    if (!uv_is_closing(h)) uv_close(h, nullptr);
  }, nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);
}

}  // namespace corepool::pool
