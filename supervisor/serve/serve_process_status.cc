// What the serve process reports about itself: the systemd status line, the
// watchdog ping and the snapshot behind /metrics. ServeProcess's other methods are
// in serve.cc.
#include <unistd.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "supervisor/pool/process_memory.h"
#include "supervisor/serve/serve_process.h"

namespace corepool {

// Loop thread. WATCHDOG=1 proves the loop turns; it is withheld when the pool
// has not had every worker ready for a minute (crash-looping workers), so that
// systemd restarts the service.
void ServeProcess::on_tick() {
  const auto now = Clock::now();
  if (current()->executor().stats().all_ready) last_ready_ = now;
  if (now - last_ready_ < std::chrono::seconds(60)) notifier_.watchdog();
}

std::string ServeProcess::status_line() {
  const auto now = Clock::now();
  const uint64_t requests = http_ ? http_->stats().requests : 0;
  const double seconds = std::chrono::duration<double>(now - status_at_).count();
  const double rate = seconds > 0 ? (requests - status_requests_) / seconds : 0.0;
  status_requests_ = requests;
  status_at_ = now;
  const auto gen = current();
  if (!gen) return "starting";
  const ExecutorStats s = gen->executor().stats();
  const size_t up = std::count_if(s.pids.begin(), s.pids.end(), [](int p) { return p > 0; });
  return fmt::format("generation {}, model {}, {} mode, {}/{} workers {}, {:.1f} req/s", gen->number(),
                     gen->model().config.name, config_.mode, s.pids.empty() ? gen->executor().workers() : up,
                     gen->executor().workers(), s.all_ready ? "ready" : "up (some starting)", rate);
}

ServeSnapshot ServeProcess::snapshot() {
  ServeSnapshot s;
  const auto gen = current();
  s.http = http_ ? http_->stats() : HttpStats{};
  s.executor = gen->executor().stats();
  // Counters span generations (as Triton's statistics do): add the replaced
  // ones', draining or gone. No copy of a generation leaves the lock, so its
  // destructor stays the main thread's.
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& d : retired_) add_executor_counters(s.executor, d->executor().stats());
    add_executor_counters(s.executor, finished_);
  }
  s.mode = gen->config().mode;
  s.model = gen->model().config.name;
  s.optimize = gen->plan().optimize.applied;
  s.max_batch = gen->plan().max_batch;
  s.max_batch_measured = gen->plan().measured;
  s.generation = gen->number();
  s.reloads_failed = reloads_failed_.load();
  s.timed_out = service_ ? service_->timed_out() : 0;
  s.cancelled = (service_ ? service_->cancelled() : 0) + (audio_ ? audio_->cancelled() : 0);
  s.results_dropped = gen->results_dropped();
  s.audio_pending = audio_ ? audio_->pending() : 0;
  s.refused_unauthenticated = doors_ ? doors_->refused_unauthenticated() : 0;
  s.refused_forbidden = doors_ ? doors_->refused_forbidden() : 0;
  s.lame_duck = service_ && service_->lame_duck();
  if (streams_) streams_->fill(s);
  if (sources_) sources_->fill(s);
  s.event_subscribers = events_.subscribers();
  s.events_published = events_.published();
  s.events_dropped = events_.dropped();
  s.memory.emplace_back("supervisor", read_process_memory(::getpid()));
  for (size_t i = 0; i < s.executor.pids.size(); ++i) {
    if (s.executor.pids[i] > 0) s.memory.emplace_back("worker-" + std::to_string(i), read_process_memory(s.executor.pids[i]));
  }
  s.allocator = allocator_stats();
  return s;
}

}  // namespace corepool
