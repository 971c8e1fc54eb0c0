// StreamSession: see stream_session.h; its locking, stream_session_base.cc.
#include "supervisor/serve/stream_session.h"

namespace corepool {

StreamSession::StreamSession(uint64_t id, std::shared_ptr<Generation> generation, const PcmSpec& spec,
                             std::unique_ptr<StreamOutput> output, StreamRegistry& registry, int idle_s)
    : StreamSessionBase(id, std::move(generation), spec, std::move(output), registry, idle_s),
      builder_(model_.labels, model_.thresholds, model_.segment_seconds, model_.hop_seconds,
               [this](const Event& e) { send_event(e); },  // under mu_, from add() or finish()
               model_.quiet_index()),
      segmenter_(static_cast<size_t>(model_.segment_samples()), static_cast<size_t>(model_.hop_samples())) {}

// Every segment these samples complete goes to the executor; its last sample
// came with them (the resampler's short delay aside).
void StreamSession::take_samples(const std::vector<float>& samples, Clock::time_point arrived, bool last) {
  segmenter_.push(samples.data(), samples.size());
  Segment segment;
  auto submit = [&] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++submitted_;
      arrived_[segment.index] = arrived;
    }
    generation_->executor().submit({executor_stream_, segment.index, std::move(segment.samples)});
  };
  while (segmenter_.next(segment)) submit();
  while (last && segmenter_.finish(segment)) submit();
}

void StreamSession::on_result(SegmentResult&& r) {
  std::lock_guard<std::mutex> lock(mu_);
  ++completed_;
  if (auto it = arrived_.find(r.index); it != arrived_.end()) {
    observe_decision(it->second);
    arrived_.erase(it);
  }
  done_ahead_.insert(r.index);
  while (!done_ahead_.empty() && *done_ahead_.begin() == done_below_) {
    done_ahead_.erase(done_ahead_.begin());
    ++done_below_;
  }
  if (done_below_ > 0) tagged_seconds_.store(double(done_below_ - 1) * model_.hop_seconds + model_.segment_seconds);
  if (!r.error.empty() && failure_.empty()) failure_ = "segment " + std::to_string(r.index) + ": " + r.error;
  if (failure_.empty()) {
    try {
      builder_.add(r.index, r.scores);
    } catch (const std::exception& e) {
      failure_ = e.what();
    }
  }
  cv_.notify_all();
}

// Every result, the events still open, the summary, then the close frame.
void StreamSession::flush_and_close(const Ending& ending) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return completed_ >= submitted_; });
  const double duration = double(segmenter_.samples_pushed()) / model_.sample_rate;
  if (!gone_ && failure_.empty()) {
    try {
      builder_.finish(segmenter_.segments_emitted(), duration);
    } catch (const std::exception& e) {
      failure_ = e.what();
    }
  }
  close_flushed(ending, duration, segmenter_.segments_emitted());
}

}  // namespace corepool
