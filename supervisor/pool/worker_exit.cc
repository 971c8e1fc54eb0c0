// WorkerTable, after a worker's exit: reaping it, the verdict on how it died,
// the slot's next state (respawn with crash-loop back-off, give up, or the
// replacement of a recycled worker) and the respawns once their back-off is
// over. Loop thread only: respawn timers are libuv handles.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "supervisor/pool/worker_table.h"
#include "worker/exit_codes.h"
#include "worker/worker_process.h"

namespace corepool::pool {
namespace {

constexpr int kCrashLoopTries = 10;          // deaths before ready after which a slot is given up
constexpr uint64_t kKilledStartingMs = 100;  // pause after an outside kill of a starting worker

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
// chaos test) and convicts nobody; our own kills are counted separately.
bool crashed(int status) {
  if (WIFSIGNALED(status)) return WTERMSIG(status) != SIGKILL && WTERMSIG(status) != SIGTERM;
  return WIFEXITED(status) && WEXITSTATUS(status) != exit_status(ExitCode::kWorkerStopped);
}

bool exited_with(int status, ExitCode code) { return WIFEXITED(status) && WEXITSTATUS(status) == exit_status(code); }

}  // namespace

bool WorkerTable::reap(Worker& w, int& status) {
  // Only this slot's process: waitpid(-1) would steal the exit status of
  // children that other code in this process is waiting for.
  return has_process(w.state) && ::waitpid(w.pid, &status, WNOHANG) == w.pid;
}

ExitVerdict WorkerTable::settle_exit(Worker& w, int status, bool shutting_down) {
  const WorkerState was = w.state;
  ExitVerdict verdict{exit_text(status), false};
  if (was == WorkerState::kKilled) verdict.how += " after missing its heartbeat deadline";
  mirror_.worker_exited(w.index, w.channel->control);  // its counters are final; the channel is memset at respawn
  w.pid = 0;
  if (shutting_down) {
    set_state(w, WorkerState::kEmpty);
    return verdict;  // not crashed: whatever it held is requeued and dropped with the loop
  }
  if (w.recycle != Recycle::kNo && exited_with(status, ExitCode::kWorkerStopped)) {
    // Exited as asked, drained first: replaced at once, as a recycle, not a restart.
    mirror_.count(w.recycle == Recycle::kRequests ? &PoolCounters::recycled_max_requests
                                                  : &PoolCounters::recycled_max_rss);
    spdlog::info("worker {} recycled; starting its replacement", w.index);
    schedule_respawn(w, 0);
    return verdict;
  }
  w.recycle = Recycle::kNo;  // a recycle that ended any other way is a death like any other
  verdict.crashed = crashed(status) || was == WorkerState::kKilled;
  if (exited_with(status, ExitCode::kWorkerBootFailure)) {
    spdlog::error("worker {} could not start ({}); not respawning it", w.index, verdict.how);
    set_state(w, WorkerState::kFailed);
    mirror_.boot_failed("worker " + std::to_string(w.index) + " could not start: see its log above");
    return verdict;
  }
  spdlog::warn("worker {} {}; {} request(s) in flight go to other workers", w.index, verdict.how, w.slots.in_use());
  // Only a crash before ready counts towards a crash loop (kill() counted ours
  // already): a SIGKILL from outside (an operator, the OOM killer, a chaos
  // test) says nothing about the worker, so it costs a short pause, never the slot.
  const bool was_starting = was == WorkerState::kStarting;
  if (was_starting && crashed(status)) ++w.boot_crashes;
  schedule_respawn(w, was_starting && !crashed(status) ? kKilledStartingMs : 0);
  return verdict;
}

// A worker that keeps dying before it is ready is crash-looping: back off
// exponentially (options' respawn_backoff_ms .. respawn_backoff_max_ms, by
// default 100 ms .. 10 s) and give the slot up after 10 tries.
// `delay_ms` is the pause when it is not crash-looping.
void WorkerTable::schedule_respawn(Worker& w, uint64_t delay_ms) {
  if (w.boot_crashes >= kCrashLoopTries) {
    spdlog::error("worker {} died {} times before becoming ready; giving the slot up", w.index, w.boot_crashes);
    set_state(w, WorkerState::kFailed);
    return;
  }
  if (w.boot_crashes > 0) {
    delay_ms = std::min<uint64_t>(options_.respawn_backoff_max_ms,
                                  uint64_t(options_.respawn_backoff_ms) << (w.boot_crashes - 1));
    spdlog::warn("worker {} died before becoming ready ({} of {} tries); respawning in {} ms", w.index,
                 w.boot_crashes, kCrashLoopTries, delay_ms);
  }
  set_state(w, WorkerState::kRespawnWait);
  uv_timer_start(&w.respawn_timer, on_respawn_timer_, delay_ms, 0);
}

void WorkerTable::spawn_due() {
  for (auto& w : workers_) {
    if (w->state == WorkerState::kEmpty) {
      spawn(*w);  // the first generation
      continue;
    }
    // libuv stops a one-shot timer before it calls back: an inactive timer in
    // kRespawnWait means the back-off is over.
    if (w->state != WorkerState::kRespawnWait || uv_is_active(reinterpret_cast<uv_handle_t*>(&w->respawn_timer))) {
      continue;
    }
    if (w->recycle == Recycle::kNo) mirror_.count(&PoolCounters::restarts);  // a replacement after a death
    spawn(*w);
  }
}

}  // namespace corepool::pool
