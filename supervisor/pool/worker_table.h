// The worker table: one slot per worker, nginx style (a respawn reuses its
// slot, channel segment and eventfd). Owns each slot's process and WorkerState:
// spawn (on the loop thread only), deadlines, recycling, exits, respawn with
// back-off. Driven by the supervisor loop (loop thread, or under its mutex);
// the dispatcher reads the slots and uses their rings.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shm/channel.h"
#include "shm/segment.h"
#include "shm/slab.h"
#include "supervisor/pool/pool_mirror.h"
#include "supervisor/pool/pool_options.h"
#include "supervisor/pool/worker_state.h"
#include "worker/shared_weights.h"

namespace corepool::pool {

// Why a ready worker is being replaced on purpose (engine.max_requests,
// engine.max_rss_mb): it takes no new work, and exits once it holds none.
enum class Recycle { kNo, kRequests, kRss };

struct Worker {
  int index = 0;
  WorkerState state = WorkerState::kEmpty;  // changed only by WorkerTable::set_state()
  pid_t pid = 0;                            // > 0 exactly while has_process(state)
  shm::Segment segment;                     // the channel: control, rings, slab
  shm::ChannelData* channel = nullptr;
  std::unique_ptr<shm::RingProducer<shm::RequestDesc, shm::kRingSlots>> requests;
  std::unique_ptr<shm::RingConsumer<shm::CompletionDesc, shm::kRingSlots>> completions;
  shm::SlotPool slots{0};                // one slab slot per request in flight (the layout's count, set by create())
  std::vector<uint64_t> slot_owner;      // request id per slab slot; 0 = free
  uint32_t follow_ups = 0;               // of those, requests its own completions submitted (Dispatcher::least_loaded)
  int eventfd = -1;
  uv_poll_t poll{};           // the supervisor loop's: completions and readiness
  uv_timer_t respawn_timer{};  // armed in kRespawnWait; the replacement forks once it has fired
  int boot_crashes = 0;        // consecutive deaths before ready (crash-loop back-off)
  int generations = 0;         // processes spawned in this slot so far
  int64_t start_deadline_ns = 0;  // kStarting past this (CLOCK_MONOTONIC) = hung before ready
  Recycle recycle = Recycle::kNo;  // why it is being replaced; kept until its replacement forks
};

// How a reaped worker died, for the dispatcher's re-dispatch.
struct ExitVerdict {
  std::string how;       // "killed by signal 11 (...)", for logs and poison errors
  bool crashed = false;  // its running batch is suspect (poison bookkeeping)
};

class WorkerTable {
 public:
  WorkerTable(const ProcessPoolOptions& options, const shm::ChannelLayout& layout,
              std::shared_ptr<const LoadedModel> model, PoolMirror& mirror);
  ~WorkerTable();  // closes the eventfds; every process must be reaped by then

  // Creates the channel segments and eventfds and initialises each slot's
  // libuv handles on `loop`; `on_respawn_timer` is the respawn timers' callback.
  void create(uv_loop_t* loop, const SharedWeights* weights, uv_timer_cb on_respawn_timer);

  std::vector<std::unique_ptr<Worker>>& slots() { return workers_; }
  bool none_left() const;     // every slot failed: queued work can never run
  bool all_reaped() const;    // no slot has a process
  bool all_ready() const;     // every slot kReady (recycling waits for this)

  void spawn(Worker& w);      // loop thread only (see supervisor_loop.cc)
  void note_ready(Worker& w);  // kStarting -> kReady once the worker says so
  void kill(Worker& w);        // SIGKILL; the caller logs why
  bool reap(Worker& w, int& status);  // waitpid(WNOHANG) of this slot's process only
  // Reaped: the slot's next state (respawn, failure, recycle replacement).
  ExitVerdict settle_exit(Worker& w, int status, bool shutting_down);
  // Forks into every slot that needs a process now: kEmpty before the first
  // spawn, kRespawnWait once its timer has fired. Never while shutting down.
  void spawn_due();

  void kill_hung();           // start deadline and heartbeat deadline
  void recycle_due(bool read_rss);
  void stop_if_drained(Worker& w);
  void begin_shutdown();      // every process asked to exit 0; no respawn any more
  void kill_remaining();      // the shutdown deadline passed
  void close_handles();

 private:
  void set_state(Worker& w, WorkerState to);
  void init_channel(Worker& w);
  void ask_to_stop(Worker& w);
  void schedule_respawn(Worker& w, uint64_t delay_ms);
  void begin_recycle(Worker& w, Recycle why, const std::string& what);

  const ProcessPoolOptions& options_;
  const shm::ChannelLayout& layout_;
  std::shared_ptr<const LoadedModel> model_;
  PoolMirror& mirror_;
  const SharedWeights* weights_ = nullptr;
  uv_timer_cb on_respawn_timer_ = nullptr;
  pid_t self_pid_ = 0;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace corepool::pool
