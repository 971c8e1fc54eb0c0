// Engine threads: take a batch, run features + forward without holding the
// lock, hand each result to the completion callback, repeat. Exceptions are
// caught per batch (c10::Error included) and become per-segment errors, so one
// bad batch never takes the process down.
#include "worker/thread_executor.h"

#include <chrono>
#include <cstring>

#include <spdlog/spdlog.h>

#include "worker/host/cpus.h"
#include "worker/engine.h"
#include "worker/runtime.h"

namespace corepool {
namespace {

// The executor and slot of the engine this thread runs, if it runs one: a
// try_submit() from its completions goes to its own queue.
thread_local const void* t_executor = nullptr;
thread_local int t_slot = -1;

}  // namespace

ThreadExecutor::ThreadExecutor(std::shared_ptr<const LoadedModel> model,
                               ThreadExecutorOptions options, Completion on_complete)
    : model_(std::move(model)), options_(std::move(options)), on_complete_(std::move(on_complete)) {
  if (options_.threads < 1) options_.threads = 1;
  if (options_.max_batch < 1) options_.max_batch = 1;
  depth_ = options_.queue_depth > 0 ? options_.queue_depth
                                    : 4 * static_cast<size_t>(options_.threads * options_.max_batch);
  busy_seconds_.assign(options_.threads, 0.0);
  own_.resize(static_cast<size_t>(options_.threads));
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this, i] { run(i); });
  std::unique_lock<std::mutex> lock(mu_);
  started_cv_.wait(lock, [this] { return started_ == options_.threads || startup_error_; });
  if (startup_error_) {
    stopping_ = true;
    lock.unlock();
    work_ready_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    std::rethrow_exception(startup_error_);
  }
}

ThreadExecutor::~ThreadExecutor() {
  wait_idle();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadExecutor::submit(SegmentTask task) {
  std::unique_lock<std::mutex> lock(mu_);
  space_ready_.wait(lock, [this] { return in_flight_ < depth_; });
  queue_.push_back({std::move(task), Clock::now()});
  ++in_flight_;
  lock.unlock();
  work_ready_.notify_one();
}

// From one of this executor's engine threads (a completion), the tasks go to
// that engine's own queue and no one is woken: the engine takes them itself as
// soon as its completions are done. Shared through the common queue instead,
// an engine that had just finished took the group another engine's call had
// made, that one found nothing and waited, and the calls came apart (Silero,
// 200 files, two engines: mean batch 65-80 of the 100 each could run).
bool ThreadExecutor::try_submit(std::vector<SegmentTask>& tasks) {
  const size_t n = tasks.size();
  const bool own = t_executor == this;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (in_flight_ + n > depth_) return false;
    const Clock::time_point now = Clock::now();
    std::deque<Queued>& to = own ? own_[static_cast<size_t>(t_slot)] : queue_;
    for (auto& t : tasks) to.push_back({std::move(t), now});
    in_flight_ += n;
  }
  tasks.clear();
  if (own) return true;
  // One task needs one thread: waking them all would have the others contend
  // for the lock (and the cpu the forward runs on) only to find nothing.
  if (n == 1) {
    work_ready_.notify_one();
  } else {
    work_ready_.notify_all();
  }
  return true;
}

ExecutorStats ThreadExecutor::stats() const {
  ExecutorStats s;
  s.all_ready = true;  // the constructor returns only once every engine thread has started
  std::lock_guard<std::mutex> lock(mu_);
  s.outstanding = in_flight_;
  s.depth = depth_;
  s.busy_seconds = busy_seconds_;
  s.batches = batches_;
  s.segments = segments_;
  s.cancelled = cancelled_;
  return s;
}

void ThreadExecutor::cancel(uint64_t stream) {
  std::vector<SegmentTask> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto drop_from = [&](std::deque<Queued>& q) {
      for (auto it = q.begin(); it != q.end();) {
        if (it->task.stream != stream) {
          ++it;
          continue;
        }
        dropped.push_back(std::move(it->task));
        it = q.erase(it);
      }
    };
    drop_from(queue_);
    for (auto& q : own_) drop_from(q);
    cancelled_ += dropped.size();
  }
  // Outside the lock, like every completion; then their queue space is free.
  for (const SegmentTask& t : dropped) on_complete_({t.stream, t.index, {}, "cancelled: the request's deadline passed", {}});
  if (!dropped.empty()) finish_batch(dropped.size());
}

void ThreadExecutor::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return in_flight_ == 0; });
}

double ThreadExecutor::mean_batch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batches_ ? static_cast<double>(segments_) / batches_ : 0.0;
}

size_t ThreadExecutor::idle_engines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

bool ThreadExecutor::has_work(int slot) const { return !queue_.empty() || !own_[static_cast<size_t>(slot)].empty(); }

std::vector<SegmentTask> ThreadExecutor::take_batch(int slot, std::vector<uint64_t>& queue_ns,
                                                    const EngineArena& arena) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto ready = [this, slot] { return has_work(slot) || stopping_; };
  // 100 ms without work: give this engine's activations back (engine_arena.h),
  // once per idle spell, as a worker process does.
  ++waiting_;
  if (!work_ready_.wait_for(lock, std::chrono::milliseconds(100), ready)) {
    lock.unlock();
    arena.purge();
    lock.lock();
    work_ready_.wait(lock, ready);
  }
  --waiting_;
  std::vector<SegmentTask> batch;
  queue_ns.clear();
  const Clock::time_point now = Clock::now();
  const auto take = [&](std::deque<Queued>& q, size_t up_to) {
    while (!q.empty() && batch.size() < up_to) {
      batch.push_back(std::move(q.front().task));
      queue_ns.push_back(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(now - q.front().at).count()));
      q.pop_front();
    }
  };
  // Its own first, whole (up to max_batch): they are the group its last call made.
  take(own_[static_cast<size_t>(slot)], static_cast<size_t>(options_.max_batch));
  if (!batch.empty()) {
    ++running_;
    return batch;
  }
  // Dynamic batching without delay: take what is queued now, up to max_batch,
  // but only this engine's share when others are free too: one engine taking
  // all the queue while another idles halves the throughput of work that
  // comes in groups (a stateful model's lanes go round as the groups their
  // calls made, so the split made here lasts the whole run). Free is every
  // engine not holding a batch, not only those already asleep in the wait: an
  // engine between its start (or its last batch) and the wait takes the rest
  // as soon as it looks. Counting only the sleeping ones, the 200 files' lanes
  // that were queued as the engines came up went whole to one engine in two
  // runs of three while the other idled to the end (Silero, AMD EPYC Zen 4).
  const size_t free_engines = static_cast<size_t>(options_.threads) - running_;
  take(queue_, std::min<size_t>(options_.max_batch, (queue_.size() + free_engines - 1) / free_engines));
  if (!queue_.empty() && waiting_ > 0) work_ready_.notify_one();  // the rest is another's share
  if (!batch.empty()) ++running_;
  return batch;
}

void ThreadExecutor::end_running() {
  std::lock_guard<std::mutex> lock(mu_);
  --running_;
}

// Before the completions go out: whoever sees a result also sees it counted.
void ThreadExecutor::account(int slot, size_t segments, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++batches_;
  segments_ += segments;
  busy_seconds_[slot] += seconds;
}

void ThreadExecutor::finish_batch(size_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  in_flight_ -= n;
  const bool idle = in_flight_ == 0;
  lock.unlock();
  space_ready_.notify_all();
  if (idle) idle_.notify_all();
}

// A task of the wrong length would make the feature step (or the view of a
// model input) read past its buffer: answer it with an error here and run the
// rest of the batch.
void ThreadExecutor::reject_misshapen(std::vector<SegmentTask>& batch, std::vector<uint64_t>& queue_ns) {
  size_t kept = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    SegmentTask& t = batch[i];
    std::string error = item_size_error(model_->config, t.input, t.samples.size());
    if (error.empty()) {
      if (i != kept) {
        batch[kept] = std::move(t);
        queue_ns[kept] = queue_ns[i];
      }
      ++kept;
      continue;
    }
    on_complete_({t.stream, t.index, {}, std::move(error), {}});
    finish_batch(1);
  }
  batch.resize(kept);
  queue_ns.resize(kept);
}

void ThreadExecutor::run_batch(Engine& engine, int slot, std::vector<SegmentTask>& batch,
                               const std::vector<uint64_t>& queue_ns) {
  std::vector<BatchItem> items;
  items.reserve(batch.size());
  for (const auto& t : batch) items.push_back({t.samples.data(), t.input, t.samples.size()});
  std::vector<std::vector<float>> scores;
  std::string error;
  EngineTiming timing;
  const auto started = std::chrono::steady_clock::now();
  try {
    scores = engine.infer_items(items, &timing);
  } catch (const c10::Error& e) {
    error = std::string("inference failed: ") + e.what_without_backtrace();
  } catch (const std::exception& e) {
    error = std::string("inference failed: ") + e.what();
  }
  account(slot, batch.size(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  for (size_t i = 0; i < batch.size(); ++i) {
    SegmentResult r{batch[i].stream, batch[i].index, {}, error, {}};
    if (error.empty()) r.scores = std::move(scores[i]);
    r.timing = {queue_ns[i], timing.input_ns, timing.infer_ns, timing.output_ns,
                static_cast<uint32_t>(batch.size()), static_cast<uint32_t>(i), slot};
    on_complete_(std::move(r));
  }
  finish_batch(batch.size());
}

void ThreadExecutor::run(int slot) {
  std::unique_ptr<Engine> engine;
  const EngineArena arena;  // its activations stay until it idles (engine_arena.h)
  try {
    if (!options_.cpus.empty()) {
      const int cpu = options_.cpus[slot % options_.cpus.size()];
      if (int rc = pin_current_thread(cpu); rc != 0) {
        spdlog::warn("engine thread {}: pinning to cpu {} failed: {}", slot, cpu, std::strerror(-rc));
      }
    }
    t_executor = this;
    t_slot = slot;
    configure_engine_thread();  // the graph executor settings main() gave its own thread
    engine = std::make_unique<Engine>(model_);
    engine->warm_up(options_.max_batch);  // checks the model, and warms this thread for full batches
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!startup_error_) startup_error_ = std::current_exception();
    started_cv_.notify_all();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++started_;
  }
  started_cv_.notify_all();

  for (;;) {
    std::vector<uint64_t> queue_ns;
    std::vector<SegmentTask> batch = take_batch(slot, queue_ns, arena);
    if (batch.empty()) return;  // stopping and nothing left
    reject_misshapen(batch, queue_ns);
    if (!batch.empty()) run_batch(*engine, slot, batch, queue_ns);
    end_running();
  }
}

}  // namespace corepool
