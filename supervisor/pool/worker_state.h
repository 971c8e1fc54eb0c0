// The life of one worker slot as ONE explicit state, and every transition the
// pool may make between states, each with its reason. WorkerTable sets states
// (through set_state(), which checks may_become()); the dispatcher and the
// supervisor loop only read them. Loop thread only.
#pragma once

namespace corepool::pool {

// A slot's process, if any, and what it may be asked for. Facts that are not
// about the process's stage stay data in the slot: how many times it died
// before ready (back-off), why it is being recycled, how many generations ran.
enum class WorkerState {
  kEmpty,        // no process, none scheduled: before the first spawn, and after an exit during shutdown
  kStarting,     // forked, not yet ready; takes requests (they wait in its ring) and has a start deadline
  kReady,        // serving; the only state a recycle may start from
  kRecycling,    // ready but past max_requests / max_rss: no new work, finishes what it holds
  kStopping,     // asked to exit 0 (a drained recycle, or the pool shutting down); awaiting its exit
  kKilled,       // SIGKILL sent by us (hung, a deadline, a corrupt ring); awaiting its reap
  kRespawnWait,  // reaped; its replacement forks when the respawn timer has fired (back-off)
  kFailed,       // given up: a boot failure (exit 70) or a crash loop; never respawned
};

// A live process belongs to the slot: it must be reaped before the slot's
// channel may be re-initialised.
constexpr bool has_process(WorkerState s) {
  return s == WorkerState::kStarting || s == WorkerState::kReady || s == WorkerState::kRecycling ||
         s == WorkerState::kStopping || s == WorkerState::kKilled;
}

// The dispatcher may push new requests to it. A starting worker takes them:
// they wait in its ring until it is ready, which saves a round trip after a respawn.
constexpr bool takes_work(WorkerState s) { return s == WorkerState::kStarting || s == WorkerState::kReady; }

// Every transition the pool makes, and only those.
constexpr bool may_become(WorkerState from, WorkerState to) {
  using S = WorkerState;
  switch (to) {
    case S::kStarting:  // fork() succeeded: the first spawn, or a respawn after its back-off
      return from == S::kEmpty || from == S::kRespawnWait;
    case S::kReady:  // the worker wrote kReady into its control block
      return from == S::kStarting;
    case S::kRecycling:  // recycle_due() picked it: one slot at a time, only from ready
      return from == S::kReady;
    case S::kStopping:  // a drained recycle is asked to exit; or the pool shuts down (a starting
                        // worker is asked too, but keeps its start deadline: it has no heartbeat yet)
      return from == S::kRecycling || from == S::kReady;
    case S::kKilled:  // hung, past its start deadline, a corrupt ring, or alive at the shutdown deadline
      return has_process(from) && from != S::kKilled;
    case S::kRespawnWait:  // reaped (or fork() failed) and worth another try
      return has_process(from) || from == S::kEmpty || from == S::kRespawnWait;
    case S::kFailed:  // exit 70 (boot failure), the 10th death before ready, or the 10th failed fork()
      return has_process(from) || from == S::kEmpty || from == S::kRespawnWait;
    case S::kEmpty:  // the pool shuts down: a reaped worker, or a respawn cancelled, is never started again
      return has_process(from) || from == S::kRespawnWait;
  }
  return false;
}

constexpr const char* to_string(WorkerState s) {
  switch (s) {
    case WorkerState::kEmpty: return "empty";
    case WorkerState::kStarting: return "starting";
    case WorkerState::kReady: return "ready";
    case WorkerState::kRecycling: return "recycling";
    case WorkerState::kStopping: return "stopping";
    case WorkerState::kKilled: return "killed";
    case WorkerState::kRespawnWait: return "respawn-wait";
    case WorkerState::kFailed: return "failed";
  }
  return "?";
}

}  // namespace corepool::pool
