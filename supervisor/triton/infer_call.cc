// Whichever comes first answers, under mu_: it closes the stream (so that the
// others find nothing), then answers outside the lock, since `done` may do
// anything, even cancel() this very call. A deadline or a cancel() also
// drops the segments no engine has started: their queue space is free at once.
#include "supervisor/triton/infer_call.h"

#include <algorithm>

namespace corepool {
namespace {

uint64_t ns_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count());
}

}  // namespace

ServeInferCall::ServeInferCall(std::shared_ptr<Generation> gen, triton::InferOutput header, size_t items,
                               triton::InferDone done, std::shared_ptr<InferCounters> counters,
                               std::weak_ptr<DeadlineTimer> deadlines)
    : gen_(std::move(gen)), out_(std::move(header)), done_(std::move(done)), counters_(std::move(counters)),
      deadlines_(std::move(deadlines)) {
  out_.scores.resize(items);
}

void ServeInferCall::start(std::vector<std::vector<float>>&& items, std::optional<Clock::time_point> deadline,
                           std::string deadline_source) {
  std::shared_ptr<ServeInferCall> self = shared_from_this();
  Generation& gen = *gen_;
  // The stream holds the call until it is closed: by the answer, whichever it is.
  stream_ = gen.open_stream([self](SegmentResult&& r) { self->on_result(std::move(r)); });
  std::vector<SegmentTask> tasks;
  tasks.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) tasks.push_back({stream_, i, std::move(items[i]), TaskInput::kModelInput});
  if (!gen.executor().try_submit(tasks)) {
    const std::string message = "the inference queue is full (" + std::to_string(gen.executor().stats().depth) +
                                " segments); retry later";
    {
      std::lock_guard<std::mutex> lock(mu_);
      close_locked();
    }
    answer({triton::Code::kResourceExhausted, message});
    return;
  }
  if (!deadline) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!gen_) return;  // answered already: every result came before the deadline was set
  deadline_source_ = std::move(deadline_source);
  if (auto timer = deadlines_.lock()) deadline_ = timer->add(*deadline, [self] { self->expire(); });
}

void ServeInferCall::on_result(SegmentResult&& r) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!gen_) return;  // answered already (deadline, cancel): a late result, dropped
  if (!r.error.empty() && error_.empty()) error_ = "item " + std::to_string(r.index) + ": " + r.error;
  // A request's phase is its slowest item's: the one its answer waited for.
  phases_.queue = std::max(phases_.queue, r.timing.queue_ns);
  phases_.input = std::max(phases_.input, r.timing.input_ns);
  phases_.infer = std::max(phases_.infer, r.timing.infer_ns);
  phases_.output = std::max(phases_.output, r.timing.output_ns);
  if (r.index < out_.scores.size()) out_.scores[r.index] = std::move(r.scores);
  if (++done_items_ < out_.scores.size()) return;
  close_locked();
  lock.unlock();
  if (error_.empty()) {
    answer({});
  } else {
    answer({triton::Code::kInternal, error_});
  }
}

void ServeInferCall::expire() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!gen_) return;
  deadline_ = 0;  // running now: nothing to cancel
  const std::shared_ptr<Generation> gen = gen_;
  const std::string message = "no answer within " + deadline_source_ + " (" + std::to_string(done_items_) + " of " +
                              std::to_string(out_.scores.size()) +
                              " items done); the request is cancelled and late results are dropped";
  close_locked();  // the stream first: thread mode completes cancelled tasks inside cancel()
  lock.unlock();
  gen->executor().cancel(stream_);
  counters_->timed_out.fetch_add(1, std::memory_order_relaxed);
  answer({triton::Code::kDeadlineExceeded, message});
}

void ServeInferCall::cancel() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!gen_) return;
  const std::shared_ptr<Generation> gen = gen_;
  close_locked();
  lock.unlock();
  gen->executor().cancel(stream_);
  counters_->cancelled.fetch_add(1, std::memory_order_relaxed);
  answer({triton::Code::kCancelled, "the client cancelled the request (or hung up) before its answer"});
}

bool ServeInferCall::close_locked() {
  if (!gen_) return false;
  gen_->close_stream(stream_);
  if (deadline_ != 0) {
    if (auto timer = deadlines_.lock()) timer->cancel(deadline_);
    deadline_ = 0;
  }
  gen_.reset();  // the server holds the generation too: never the last reference
  return true;
}

void ServeInferCall::answer(triton::Status status) {
  const uint64_t total = ns_between(start_, Clock::now());
  if (status.ok()) {
    counters_->stats.record_success(out_.scores.size(), total, phases_);
  } else {
    counters_->stats.record_failure(total);
    out_.scores.clear();
  }
  triton::InferDone done = std::move(done_);
  done(std::move(status), std::move(out_));
}

}  // namespace corepool
