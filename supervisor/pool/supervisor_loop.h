// The supervisor loop: a libuv loop on its own thread that drives the worker
// table and the dispatcher. Its callbacks (wake-up, SIGCHLD, the 100 ms tick,
// a worker's eventfd, respawn and shutdown timers) only say what happened;
// supervise() runs the steps in their one order. Owned by ProcessPool::Impl,
// which must keep the table, dispatcher and submissions alive longer.
#pragma once

#include <uv.h>

#include <mutex>
#include <thread>
#include <vector>

#include "supervisor/pool/dispatch.h"
#include "supervisor/pool/submissions.h"
#include "supervisor/pool/worker_table.h"

namespace corepool::pool {

class SupervisorLoop {
 public:
  SupervisorLoop(WorkerTable& table, Dispatcher& dispatcher, Submissions& submissions);
  // Stops the workers (asked, then killed after 5 s) and joins the thread.
  ~SupervisorLoop();

  // Creates the slots, then starts the loop thread, which forks the workers.
  void start(const SharedWeights* weights);
  // Any thread: the loop looks at the submissions soon. Never blocks.
  void wake();
  // Any thread: adds `tasks` (all or none, as Submissions::try_add) and, if
  // the loop is free right now, dispatches them on this thread. From a
  // completion (delivered inside a pass, loop_mu_ held by this thread) it only
  // adds them, and the pass dispatches them before it ends.
  bool try_submit(std::vector<SegmentTask>& tasks);

 private:
  // What woke the loop: the steps that wait for one of these run only then.
  enum Event : unsigned {
    kStarted = 1u << 0,           // the loop thread's first pass
    kWoken = 1u << 1,             // submissions, cancels or a stop request
    kChildExited = 1u << 2,       // SIGCHLD
    kTick = 1u << 3,              // every 100 ms
    kCompletions = 1u << 4,       // a worker's eventfd
    kRespawnTimer = 1u << 5,      // a back-off is over
    kShutdownDeadline = 1u << 6,  // workers asked to stop 5 s ago
  };

  void run();
  void on_event(unsigned events);  // takes loop_mu_, then supervise()
  void supervise(unsigned events);

  // The steps, in supervise()'s order.
  void take_submissions();
  void read_completions();
  void reap_exited();
  void kill_hung(unsigned events);
  void recycle_due(unsigned events);
  void bring_to_target_size();
  void dispatch();
  void dispatch_added();  // dispatch(), then again while completions add tasks (try_submit)
  void close_when_all_reaped();

  void begin_shutdown();
  void close_loop_without_thread();

  WorkerTable& table_;
  Dispatcher& dispatcher_;
  Submissions& submissions_;

  uv_loop_t loop_{};
  bool loop_ready_ = false;  // uv_loop_init succeeded
  uv_async_t wake_{};
  uv_signal_t sigchld_{};
  uv_timer_t heartbeat_timer_{};
  uv_timer_t shutdown_timer_{};
  std::thread thread_;
  // Serialises whoever drives the worker table: the loop thread in every
  // callback, a try_submit() dispatching inline. Taken before any other lock.
  std::mutex loop_mu_;
  bool shutting_down_ = false;  // under loop_mu_
  bool added_in_pass_ = false;  // under loop_mu_: a completion's try_submit added tasks
  bool closed_ = false;         // under loop_mu_: every handle is closing
};

}  // namespace corepool::pool
