// Engine threads: take a batch, run features + forward without holding the
// lock, hand each result to the completion callback, repeat. Exceptions are
// caught per batch (c10::Error included) and become per-segment errors, so one
// bad batch never takes the process down.
#include "worker/thread_executor.h"

#include <cstring>

#include <spdlog/spdlog.h>

#include "worker/cpus.h"
#include "worker/engine.h"

namespace corepool {

ThreadExecutor::ThreadExecutor(std::shared_ptr<const LoadedModel> model,
                               ThreadExecutorOptions options, Completion on_complete)
    : model_(std::move(model)), options_(std::move(options)), on_complete_(std::move(on_complete)) {
  if (options_.threads < 1) options_.threads = 1;
  if (options_.max_batch < 1) options_.max_batch = 1;
  depth_ = options_.queue_depth > 0 ? options_.queue_depth
                                    : 4 * static_cast<size_t>(options_.threads * options_.max_batch);
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
  queue_.push_back(std::move(task));
  ++in_flight_;
  lock.unlock();
  work_ready_.notify_one();
}

void ThreadExecutor::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return in_flight_ == 0; });
}

double ThreadExecutor::mean_batch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batches_ ? static_cast<double>(segments_) / batches_ : 0.0;
}

std::vector<SegmentTask> ThreadExecutor::take_batch() {
  std::unique_lock<std::mutex> lock(mu_);
  work_ready_.wait(lock, [this] { return !queue_.empty() || stopping_; });
  std::vector<SegmentTask> batch;
  // Dynamic batching without delay: take what is queued now, up to max_batch.
  while (!queue_.empty() && batch.size() < static_cast<size_t>(options_.max_batch)) {
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  if (!batch.empty()) {
    ++batches_;
    segments_ += batch.size();
  }
  return batch;
}

void ThreadExecutor::finish_batch(size_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  in_flight_ -= n;
  const bool idle = in_flight_ == 0;
  lock.unlock();
  space_ready_.notify_all();
  if (idle) idle_.notify_all();
}

// A segment of the wrong length would make the feature step read past its
// buffer: answer it with an error here and run the rest of the batch.
void ThreadExecutor::reject_misshapen(std::vector<SegmentTask>& batch) {
  const size_t want = static_cast<size_t>(model_->config.segment_samples());
  size_t kept = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    SegmentTask& t = batch[i];
    if (t.samples.size() == want) {
      if (i != kept) batch[kept] = std::move(t);
      ++kept;
      continue;
    }
    on_complete_({t.stream, t.index, {},
                  "segment has " + std::to_string(t.samples.size()) + " samples, model expects " +
                      std::to_string(want)});
    finish_batch(1);
  }
  batch.resize(kept);
}

void ThreadExecutor::run(int slot) {
  std::unique_ptr<Engine> engine;
  try {
    if (!options_.cpus.empty()) {
      const int cpu = options_.cpus[slot % options_.cpus.size()];
      if (int rc = pin_current_thread(cpu); rc != 0) {
        spdlog::warn("engine thread {}: pinning to cpu {} failed: {}", slot, cpu, std::strerror(-rc));
      }
    }
    engine = std::make_unique<Engine>(model_);
    engine->check_output_shape();
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
    std::vector<SegmentTask> batch = take_batch();
    if (batch.empty()) return;  // stopping and nothing left
    reject_misshapen(batch);
    if (batch.empty()) continue;
    std::vector<const float*> pcm;
    pcm.reserve(batch.size());
    for (const auto& t : batch) pcm.push_back(t.samples.data());
    std::vector<std::vector<float>> scores;
    std::string error;
    try {
      scores = engine->infer(pcm);
    } catch (const c10::Error& e) {
      error = std::string("inference failed: ") + e.what_without_backtrace();
    } catch (const std::exception& e) {
      error = std::string("inference failed: ") + e.what();
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      SegmentResult r{batch[i].stream, batch[i].index, {}, error};
      if (error.empty()) r.scores = std::move(scores[i]);
      on_complete_(std::move(r));
    }
    finish_batch(batch.size());
  }
}

}  // namespace corepool
