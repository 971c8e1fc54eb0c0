// StatefulSession: see stateful_session.h; its locking, stream_session_base.cc.
// A result is taken only for the chunk in flight: anything else is a late
// duplicate of a re-dispatched task and is dropped.
#include "supervisor/serve/stateful_session.h"

#include <algorithm>

#include "worker/stateful_task.h"

namespace corepool {

StatefulSession::StatefulSession(uint64_t id, std::shared_ptr<Generation> generation, const PcmSpec& spec,
                                 std::unique_ptr<StreamOutput> output, StreamRegistry& registry, int idle_s)
    : StreamSessionBase(id, std::move(generation), spec, std::move(output), registry, idle_s),
      chunk_(model_.stateful.chunk_samples),
      context_(model_.stateful.context_samples),
      state_(static_cast<size_t>(model_.stateful.state_floats()), model_.stateful.state_initial) {
  const EventRules& r = model_.rules;
  const auto samples = [&](int ms) { return static_cast<int64_t>(ms) * model_.sample_rate / 1000; };
  for (size_t l = 0; l < model_.labels.size(); ++l) {
    trackers_.emplace_back(chunk_, SpeechRules{model_.thresholds[l], r.hysteresis, samples(r.min_speech_ms),
                                               samples(r.min_silence_ms), samples(r.speech_pad_ms)});
  }
}

void StatefulSession::take_samples(const std::vector<float>& samples, Clock::time_point arrived, bool last) {
  buffer_.insert(buffer_.end(), samples.begin(), samples.end());
  samples_in_ += static_cast<int64_t>(samples.size());
  arrivals_.emplace_back(samples_in_, arrived);
  tail_ = tail_ || last;
  submit_next();
  // The chunks wait here for their state, not in the base's queue: the same bound applies.
  if (static_cast<double>(buffer_.size()) > kQueueSeconds * model_.sample_rate) {
    end(StreamEnd::kQueueFull, "stream queue full: more than " + std::to_string(int(kQueueSeconds)) +
                                   " s of audio waiting for its chunks' decisions; "
                                   "send no faster than the server tags");
  }
}

StreamSessionBase::Clock::time_point StatefulSession::arrival_of(int64_t sample) {
  while (arrivals_.size() > 1 && arrivals_.front().first < sample) arrivals_.pop_front();
  return arrivals_.front().second;
}

// The chunk's window is the context then the chunk (zero-padded past the
// tail); what stays in the buffer is the next chunk's context and the rest.
bool StatefulSession::submit_next() {
  const int64_t have = static_cast<int64_t>(buffer_.size()) - context_len_;
  if (have <= 0 || (have < chunk_ && !tail_)) return false;
  std::vector<float> state;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (in_flight_ || gone_ || !failure_.empty()) return false;
    state = std::move(state_);
    in_flight_ = true;
    in_flight_index_ = static_cast<uint64_t>(next_chunk_);
    in_flight_arrived_ = arrival_of(std::min(samples_in_, (next_chunk_ + 1) * chunk_));
  }
  const int64_t window = context_len_ + std::min(have, chunk_);
  generation_->executor().submit(stateful_task(model_, executor_stream_, static_cast<uint64_t>(next_chunk_),
                                               buffer_.data(), window, context_ - context_len_, state));
  ++next_chunk_;
  const int64_t keep = std::min(context_, window);
  buffer_.erase(buffer_.begin(), buffer_.begin() + (window - keep));
  context_len_ = keep;
  return true;
}

void StatefulSession::on_result(SegmentResult&& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!in_flight_ || r.index != in_flight_index_) return;  // a late duplicate
  in_flight_ = false;
  wake();
  if (std::string error = stateful_result_error(model_, r); !error.empty()) {
    if (failure_.empty()) failure_ = std::move(error);
    return;
  }
  observe_decision(in_flight_arrived_);
  for (size_t l = 0; l < trackers_.size(); ++l) send_spans(l, trackers_[l].push(r.scores[l]));
  take_state(model_, r, state_);
  ++chunks_done_;
  tagged_seconds_.store(double(chunks_done_ * chunk_) / model_.sample_rate);
}

void StatefulSession::send_spans(size_t label, const std::vector<SpeechSpan>& spans) {
  const double rate = model_.sample_rate;
  for (const SpeechSpan& s : spans) {
    send_event({double(s.start) / rate, double(s.end) / rate, model_.labels[label], s.score});
  }
}

void StatefulSession::on_wake() {
  std::string failure;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failure = failure_;
  }
  if (failure.empty()) submit_next();
  else end(StreamEnd::kFailed, failure);
}

// Chunk by chunk to the tail (each waits for the state before it), then the
// spans still open, the summary, the close frame. A failed chunk stops it.
void StatefulSession::flush_and_close(const Ending& ending) {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !in_flight_ || gone_; });
      if (gone_ || !failure_.empty()) break;
    }
    if (!submit_next()) break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  const double duration = double(samples_in_) / model_.sample_rate;
  if (!gone_ && failure_.empty()) {
    for (size_t l = 0; l < trackers_.size(); ++l) send_spans(l, trackers_[l].finish(samples_in_));
  }
  close_flushed(ending, duration, static_cast<uint64_t>(next_chunk_));
}

}  // namespace corepool
