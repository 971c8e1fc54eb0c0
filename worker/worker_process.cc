// A worker is single-threaded: it pops up to max_batch requests (PCM or model
// input, mixed), runs them in one forward(), writes scores into the same slab
// slots and pushes one completion per request. Everything here runs in a
// freshly forked child, so it touches nothing that another thread of the parent
// may have held locked at fork time: no parent logger, no stdio, no libuv.
#include "worker/worker_process.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "shm/descriptor_check.h"
#include "shm/wake.h"
#include "worker/host/allocator_child.h"
#include "worker/host/engine_arena.h"
#include "worker/host/cpus.h"
#include "worker/engine.h"
#include "worker/exit_codes.h"
#include "worker/log_format.h"
#include "worker/optimize/optimize.h"
#include "worker/test_hooks.h"
#include "worker/runtime.h"

namespace corepool {

int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

namespace {

using Clock = std::chrono::steady_clock;

TaskInput kind_of(const shm::RequestDesc& r) {
  if ((r.flags & shm::kSplitFront) != 0) return TaskInput::kSplitFront;
  if ((r.flags & shm::kSplitSequence) != 0) return TaskInput::kSplitSequence;
  return (r.flags & shm::kModelInput) != 0 ? TaskInput::kModelInput : TaskInput::kPcm;
}

class WorkerLoop {
 public:
  WorkerLoop(const WorkerSetup& setup, shm::ChannelData* channel, const shm::ChannelLayout& layout,
             std::shared_ptr<spdlog::logger> log)
      : setup_(setup), channel_(channel), layout_(layout), log_(std::move(log)),
        requests_(&channel->requests), completions_(&channel->completions),
        slab_(reinterpret_cast<char*>(channel) + layout.slab_offset),
        crash_marker_(test_hooks::crash_on_marker()),
        grow_mb_(test_hooks::grow_mb_per_segment()) {}

  void serve(Engine& engine, const EngineArena& arena);

 private:
  void beat() { channel_->control.heartbeat_ns.store(monotonic_ns(), std::memory_order_relaxed); }
  bool should_exit() const {
    return channel_->control.stop.load(std::memory_order_acquire) != 0 || ::getppid() != setup_.parent_pid;
  }
  void take_batch(std::vector<shm::RequestDesc>& batch);
  void run_batch(Engine& engine, const std::vector<shm::RequestDesc>& batch);
  bool admit(const Engine& engine, const shm::RequestDesc& r);
  void account(size_t segments, int64_t busy_ns);
  void complete(const shm::RequestDesc& r, int32_t status, uint32_t floats = 0);
  void mark_running(const std::vector<shm::RequestDesc>& batch);
  char* slot(uint32_t i) { return slab_ + layout_.slab.offset_of(i); }
  void grow(size_t segments);

  const WorkerSetup& setup_;
  shm::ChannelData* channel_;
  shm::ChannelLayout layout_;
  std::shared_ptr<spdlog::logger> log_;
  shm::RingConsumer<shm::RequestDesc, shm::kRingSlots> requests_;
  shm::RingProducer<shm::CompletionDesc, shm::kRingSlots> completions_;
  char* slab_;
  bool crash_marker_;
  int grow_mb_;                                  // test-only leak per segment (max_rss_mb tests)
  std::vector<std::unique_ptr<char[]>> grown_;   // what grow() holds on to
  std::vector<int64_t> taken_ns_;                // per request of the batch: when it left the ring
};

void WorkerLoop::serve(Engine& engine, const EngineArena& arena) {
  std::vector<shm::RequestDesc> batch;
  batch.reserve(setup_.max_batch);
  // Freed activations held since the last purge: the warm-up's, at first.
  bool cached = setup_.check_model;
  while (!should_exit()) {
    beat();
    // Sleep at most 100 ms at a time so that the heartbeat keeps moving and a
    // stop request or an orphaning is noticed promptly. 100 ms without work:
    // give the activations back (engine_arena.h), and every other arena's
    // freed pages (a worker runs without jemalloc's background thread), once
    // per idle spell.
    if (!requests_.wait(Clock::now() + std::chrono::milliseconds(100), 2000, &channel_->control.stop)) {
      if (should_exit()) break;
      if (cached) {
        arena.purge();
        purge_allocator();
      }
      cached = false;
      continue;
    }
    cached = true;
    take_batch(batch);
    // Suspects first: whatever happens from here to the completions (features,
    // forward, a crash in either) is on this batch.
    mark_running(batch);
    run_batch(engine, batch);
    mark_running({});
    if (completions_.consumer_wants_wake()) shm::signal_eventfd(setup_.completion_eventfd);
  }
}

void WorkerLoop::take_batch(std::vector<shm::RequestDesc>& batch) {
  batch.clear();
  taken_ns_.clear();
  const auto deadline = Clock::now() + std::chrono::microseconds(setup_.max_batch_delay_us);
  while (batch.size() < static_cast<size_t>(setup_.max_batch)) {
    if (shm::RequestDesc* r = requests_.front()) {
      // A crash suspect runs alone, so that a poison input convicts only itself.
      const bool alone = (r->flags & shm::kRunAlone) != 0;
      if (alone && !batch.empty()) break;
      batch.push_back(*r);
      taken_ns_.push_back(monotonic_ns());
      requests_.pop();
      if (alone) break;
      continue;
    }
    // Dynamic batching: a short wait for a fuller batch, never past the delay.
    if (setup_.max_batch_delay_us <= 0 || !requests_.wait(deadline, 4000)) break;
  }
}

// False (and the request answered with an error) when its size is wrong for
// its kind: nothing may read past the floats the supervisor wrote.
bool WorkerLoop::admit(const Engine& engine, const shm::RequestDesc& r) {
  const auto* samples = reinterpret_cast<const float*>(slot(r.slot % layout_.slab.slot_count));
  if (crash_marker_ && r.samples >= 2 && samples[0] == test_hooks::kCrashMarker[0] &&
      samples[1] == test_hooks::kCrashMarker[1]) {
    ::raise(SIGSEGV);  // test-only poison input (test_hooks.h)
  }
  // The model's size check is arithmetic on the descriptor alone, so it goes
  // first and a wrong-sized item gets the same answer as in thread mode; the
  // layout check then guards every read of the slot.
  std::string error = item_size_error(engine.model().config, kind_of(r), r.samples);
  if (error.empty()) error = shm::request_problem(r, layout_);
  if (error.empty()) return true;
  std::snprintf(slot(r.slot % layout_.slab.slot_count) + layout_.result_offset, shm::kErrorTextBytes, "%s", error.c_str());
  complete(r, 1);
  return false;
}

// Single writer: plain load + store, no read-modify-write needed. Called
// before the batch's completions are pushed; the push is a release, so whoever
// pops one of them also sees the batch counted.
void WorkerLoop::account(size_t segments, int64_t busy_ns) {
  auto& c = channel_->control;
  c.busy_ns.store(c.busy_ns.load(std::memory_order_relaxed) + busy_ns, std::memory_order_relaxed);
  c.batches.store(c.batches.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  c.segments.store(c.segments.load(std::memory_order_relaxed) + segments, std::memory_order_relaxed);
}

void WorkerLoop::run_batch(Engine& engine, const std::vector<shm::RequestDesc>& batch) {
  std::vector<BatchItem> items;
  std::vector<shm::RequestDesc> good;
  std::vector<int64_t> taken;
  for (size_t i = 0; i < batch.size(); ++i) {
    const shm::RequestDesc& r = batch[i];
    if (!admit(engine, r)) continue;
    items.push_back({reinterpret_cast<const float*>(slot(r.slot)), kind_of(r), r.samples});
    good.push_back(r);
    taken.push_back(taken_ns_[i]);
  }
  if (good.empty()) return;
  grow(good.size());
  beat();
  const int64_t started = monotonic_ns();
  try {
    EngineTiming timing;
    auto scores = engine.infer_items(items, &timing);
    account(good.size(), monotonic_ns() - started);
    const int64_t copy_started = monotonic_ns();
    for (size_t i = 0; i < good.size(); ++i) {
      std::memcpy(slot(good[i].slot) + layout_.result_offset, scores[i].data(), scores[i].size() * sizeof(float));
    }
    // The copy into the slots is part of the copy-out; the completions go
    // after every slot has its timing.
    timing.output_ns += static_cast<uint64_t>(monotonic_ns() - copy_started);
    for (size_t i = 0; i < good.size(); ++i) {
      const shm::SlotTiming t{taken[i], timing.input_ns, timing.infer_ns, timing.output_ns,
                              static_cast<uint32_t>(good.size()), static_cast<uint32_t>(i)};
      std::memcpy(slot(good[i].slot) + layout_.timing_offset, &t, sizeof(t));
    }
    for (size_t i = 0; i < good.size(); ++i) complete(good[i], 0, static_cast<uint32_t>(scores[i].size()));
  } catch (const std::exception& e) {
    account(good.size(), monotonic_ns() - started);
    const std::string text = std::string("inference failed: ") +
        (dynamic_cast<const c10::Error*>(&e) ? static_cast<const c10::Error&>(e).what_without_backtrace() : e.what());
    for (const auto& r : good) {
      std::snprintf(slot(r.slot) + layout_.result_offset, shm::kErrorTextBytes, "%s", text.c_str());
      complete(r, 1);
    }
  }
  beat();
}

// Test-only (test_hooks::grow_mb_per_segment()): a leak of grow_mb_ MiB per segment.
void WorkerLoop::grow(size_t segments) {
  if (grow_mb_ <= 0) return;
  for (size_t i = 0; i < segments; ++i) {
    const size_t bytes = size_t(grow_mb_) << 20;
    grown_.emplace_back(new char[bytes]);
    std::memset(grown_.back().get(), 1, bytes);
  }
}

void WorkerLoop::mark_running(const std::vector<shm::RequestDesc>& batch) {
  auto& control = channel_->control;
  control.running_count.store(0, std::memory_order_relaxed);
  const size_t n = std::min<size_t>(batch.size(), shm::kMaxBatch);
  for (size_t i = 0; i < n; ++i) control.running[i].store(batch[i].request, std::memory_order_relaxed);
  control.running_count.store(static_cast<uint32_t>(n), std::memory_order_release);
}

void WorkerLoop::complete(const shm::RequestDesc& r, int32_t status, uint32_t floats) {
  // Never full while the supervisor keeps its side: at most one request per
  // slab slot (no more than kRingSlots) out per worker, each holding its slot
  // until its completion is read.
  const shm::CompletionDesc done{r.request, r.slot, status, floats};
  if (completions_.try_push(done)) return;
  log_->error("completion ring full with request {} to answer (more than {} requests out?); waiting for the "
              "supervisor to read it", r.request, shm::kRingSlots);
  // Wake the supervisor (it drains the ring on its eventfd) and wait. No
  // heartbeat meanwhile: a supervisor that never reads kills this worker at
  // its hang deadline and re-dispatches what it held; one that is gone or
  // stopping ends the wait through should_exit(), the answer dropped with it.
  while (!completions_.try_push(done)) {
    if (should_exit()) return;
    shm::signal_eventfd(setup_.completion_eventfd);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Signal state inherited from the parent (libuv's handlers, serve's signal
// pipe, a blocked mask) must not leak into the worker. SIGINT and SIGHUP are
// the supervisor's business (drain, reload): a Ctrl-C to the terminal's
// process group must not kill the workers under a draining supervisor.
void reset_signals() {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGCHLD, SIGTERM, SIGUSR1, SIGUSR2}) ::signal(sig, SIG_DFL);
  for (int sig : {SIGPIPE, SIGINT, SIGHUP}) ::signal(sig, SIG_IGN);
}

// fork() copies every descriptor of the supervisor: listening sockets, client
// connections, the loop's epoll and signal pipe. A worker holding a client's
// socket would keep it open after the supervisor closed it, so everything but
// stdio and the completion eventfd goes. (Mappings survive their fds.)
void close_inherited_fds(int keep) {
  if (keep < 3) {
    ::close_range(3, ~0U, 0);
    return;
  }
  if (keep > 3) ::close_range(3, static_cast<unsigned>(keep) - 1, 0);
  ::close_range(static_cast<unsigned>(keep) + 1, ~0U, 0);
}

// fork() does not copy page-table entries of a shared mapping: the first
// forward() would take one page fault per 4 KiB of weights (about 80,000 for
// 300 MB). One MADV_POPULATE_READ maps them all in a single system call.
void prefault(const void* base, size_t bytes) {
#ifdef MADV_POPULATE_READ
  if (base && bytes) ::madvise(const_cast<void*>(base), bytes, MADV_POPULATE_READ);
#else
  (void)base;
  (void)bytes;
#endif
}

std::shared_ptr<spdlog::logger> make_worker_logger(const WorkerSetup& setup) {
  // A single-threaded sink with no shared console mutex: the parent's logger
  // (and its mutexes) may have been mid-write in another thread at fork time.
  auto log = std::make_shared<spdlog::logger>("worker-" + std::to_string(setup.slot),
                                              std::make_shared<spdlog::sinks::stderr_sink_st>());
  log->set_formatter(make_log_formatter("%^[%L]%$ worker " + std::to_string(setup.slot) + ": %v"));
  log->set_level(spdlog::level::from_str(setup.log_level));
  return log;
}

}  // namespace

[[noreturn]] void run_worker_process(const WorkerSetup& setup, shm::ChannelData* channel,
                                     const shm::ChannelLayout& layout,
                                     std::shared_ptr<const LoadedModel> model) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != setup.parent_pid) ::_exit(exit_status(ExitCode::kWorkerStopped));  // parent died before prctl
  reset_signals();
  close_inherited_fds(setup.completion_eventfd);
  auto log = make_worker_logger(setup);
  spdlog::set_default_logger(log);
  // No jemalloc background thread here (fork stopped it, and it is not
  // restarted): with one per worker a Silero batch run of 2 workers made
  // 136,071 context switches (4,342 without) and ran 25-40 % slower (AMD EPYC
  // Zen 4). An idle spell gives the freed pages back instead (serve()).
  channel->control.pid.store(::getpid());
  channel->control.heartbeat_ns.store(monotonic_ns());
  std::unique_ptr<Engine> engine;
  const int64_t started = monotonic_ns();
  int64_t mapped = started, built = started;
  const EngineArena arena;  // its activations stay until it idles (engine_arena.h)
  try {
    configure_runtime_threads({setup.intra_op_threads, 1});
    if (setup.cpu >= 0) pin_current_thread(setup.cpu);
    if (!setup.naive_model_dir.empty()) {
      model = load_model(setup.naive_model_dir);
      const OptimizeOutcome o = optimize_model(*model, setup.optimize, /*shared=*/false, {}, setup.kernels);
      if (!o.fallback.empty()) log->warn("engine.optimize = \"{}\" not applied: {}", setup.optimize, o.fallback);
    }
    // Optimized weights live in the supervisor's arena: map them in one go.
    // The module then reads only the arena, so the segment of the weights as
    // loaded is left unmapped (mapping it too would cost as much again).
    if (const auto& arena = torch_of(*model).arena) {
      arena->prefault();
    } else {
      prefault(setup.weights, setup.weights_bytes);
    }
    mapped = monotonic_ns();
    engine = std::make_unique<Engine>(model);
    built = monotonic_ns();
    // The first generation checks on a full batch and warms the worker for
    // full batches; a replacement skips it (respawn latency).
    if (setup.check_model) {
      // Its activations stay for the first calls, which would fault them in
      // again (Silero, the 10-minute file: about 1,000 faults a worker, and
      // engines busy 0.64 -> 0.56 s); the first idle spell gives them back.
      engine->warm_up(setup.max_batch);
    }
    test_hooks::pause(test_hooks::Pause::kBootDelay, setup.slot);
  } catch (const std::exception& e) {
    log->error("cannot start: {}", e.what());
    ::_exit(exit_status(ExitCode::kWorkerBootFailure));
  }
  // Beat before ready: the supervisor judges a ready worker by its heartbeat
  // from the pass that sees it ready, and the last beat was at the start of
  // the boot. The eventfd wakes the supervisor, which may run before this
  // worker's loop beats: a boot longer than the hang deadline then got the
  // new worker killed as hung (seen with 8 naive copies loading on 2 cpus).
  channel->control.heartbeat_ns.store(monotonic_ns(), std::memory_order_relaxed);
  channel->control.state.store(static_cast<uint32_t>(shm::BootState::kReady), std::memory_order_release);
  shm::signal_eventfd(setup.completion_eventfd);  // tell the supervisor we are ready
  test_hooks::pause(test_hooks::Pause::kStallAfterReady, setup.slot);
  const int64_t ready = monotonic_ns();
  log->debug("ready (pid {}, cpu {}) in {:.1f} ms: weights mapped {:.1f}, engine {:.1f}, first forward() {:.1f}",
             ::getpid(), setup.cpu, (ready - started) / 1e6, (mapped - started) / 1e6, (built - mapped) / 1e6,
             (ready - built) / 1e6);
  WorkerLoop loop(setup, channel, layout, log);
  loop.serve(*engine, arena);
  channel->control.state.store(static_cast<uint32_t>(shm::BootState::kStopping));
  ::_exit(exit_status(ExitCode::kWorkerStopped));
}

}  // namespace corepool
