// StreamSession: see stream_session.h. Locking: mu_ guards the queue, the
// ending, the EventBuilder and the output; the stream's thread never holds it
// while it converts audio or while submit() blocks on a full executor queue,
// and the executor threads hold it only to fold a result in and hand its
// events to the output (which never blocks nor calls back).
#include "supervisor/serve/stream_session.h"

#include <algorithm>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "audio/event_json.h"
#include "supervisor/serve/stream_registry.h"

namespace corepool {

using json = nlohmann::json;

StreamSession::StreamSession(uint64_t id, std::shared_ptr<Generation> generation, const PcmSpec& spec,
                             std::unique_ptr<StreamOutput> output, StreamRegistry& registry, int idle_s)
    : id_(id),
      generation_(std::move(generation)),
      model_(generation_->model().config),
      spec_(spec),
      output_(std::move(output)),
      registry_(registry),
      idle_s_(idle_s),
      max_queue_bytes_(static_cast<size_t>(kQueueSeconds * spec.sample_rate) * static_cast<size_t>(spec.frame_bytes())),
      builder_(model_.labels, model_.thresholds, model_.segment_seconds, model_.hop_seconds,
               [this](const Event& e) {  // under mu_, from add() or finish()
                 if (gone_ || closed_) return;  // results after a refusal: the output said its last
                 events_.fetch_add(1);
                 if (!output_->event(event_json(e).dump())) dropped_.fetch_add(1);
               }),
      pcm_(spec, model_.sample_rate),
      segmenter_(static_cast<size_t>(model_.segment_samples()), static_cast<size_t>(model_.hop_samples())) {}

StreamSession::~StreamSession() { join(); }

void StreamSession::join() {
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void StreamSession::start() {
  // The sink holds the session: results that arrive after the stream closed are dropped by the generation.
  executor_stream_ = generation_->open_stream(
      [self = shared_from_this()](SegmentResult&& r) { self->on_result(std::move(r)); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_input_ = std::chrono::steady_clock::now();
  }
  thread_ = std::thread([this] { run(); });
}

StreamStat StreamSession::stat() const {
  const double audio = audio_seconds_.load();
  return {id_, audio, events_.load(), dropped_.load(), std::max(0.0, audio - tagged_seconds_.load())};
}

// ---- the wire's threads (AudioStream) ----------------------------------------

void StreamSession::push(std::string&& pcm) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ending_) return;
  last_input_ = std::chrono::steady_clock::now();
  if (queued_bytes_ + pcm.size() > max_queue_bytes_) {
    ending_ = Ending{StreamEnd::kQueueFull, "stream queue full: more than " + std::to_string(int(kQueueSeconds)) +
                                                " s of audio waiting to be tagged; send no faster than the server tags"};
  } else {
    queued_bytes_ += pcm.size();
    queue_.push_back(std::move(pcm));
  }
  cv_.notify_one();
}

void StreamSession::end(StreamEnd how, std::string reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (how == StreamEnd::kGone) gone_ = true;  // even after another ending: its summary cannot go out now
  if (!ending_) ending_ = Ending{how, std::move(reason)};
  cv_.notify_one();
}

// ---- the stream's thread ----------------------------------------------------

void StreamSession::run() {
  std::string piece;
  while (next_piece(piece)) tag_piece(piece);
  Ending ending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ending = *ending_;
  }
  if (flushes(ending.how)) {
    flush_and_close(ending);
  } else {
    generation_->executor().cancel(executor_stream_);  // what is queued is not worth running
    std::lock_guard<std::mutex> lock(mu_);
    close_output(ending.how, ending.reason, "");
  }
  generation_->close_stream(executor_stream_);
  // A reload retires the old generation once nothing holds it: not this
  // stream's registry entry, which lives until the next reap.
  generation_.reset();
  registry_.count_closed(stream_end_name(ending.how));
  finished_.store(true);
}

// The next piece of PCM; false once the stream ends (a flushing end takes
// the pieces already queued first). No piece for serve.stream_idle_s ends it.
bool StreamSession::next_piece(std::string& piece) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto ready = [this] { return !queue_.empty() || ending_; };
  while (!ready()) {
    if (cv_.wait_until(lock, last_input_ + std::chrono::seconds(idle_s_)) == std::cv_status::timeout && !ready() &&
        std::chrono::steady_clock::now() >= last_input_ + std::chrono::seconds(idle_s_)) {
      ending_ = Ending{StreamEnd::kIdle, idle_reason(idle_s_)};
    }
  }
  if (queue_.empty() || !flushes(ending_ ? ending_->how : StreamEnd::kEnd)) return false;
  piece = std::move(queue_.front());
  queue_.pop_front();
  queued_bytes_ -= piece.size();
  return true;
}

void StreamSession::tag_piece(const std::string& piece) {
  samples_.clear();
  std::string error;
  try {
    error = pcm_.push(piece, samples_);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!error.empty()) return end(StreamEnd::kBadAudio, error);
  audio_seconds_.store(pcm_.seconds_in());
  segmenter_.push(samples_.data(), samples_.size());
  submit_ready(false);
}

void StreamSession::submit_ready(bool last) {
  Segment segment;
  auto submit = [&] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++submitted_;
    }
    generation_->executor().submit({executor_stream_, segment.index, std::move(segment.samples)});
  };
  while (segmenter_.next(segment)) submit();
  while (last && segmenter_.finish(segment)) submit();
}

void StreamSession::on_result(SegmentResult&& r) {
  std::lock_guard<std::mutex> lock(mu_);
  ++completed_;
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
  cv_.notify_one();
}

// The tail of the audio, every result, the events still open, the summary,
// then the close frame.
void StreamSession::flush_and_close(const Ending& ending) {
  samples_.clear();
  pcm_.finish(samples_);
  segmenter_.push(samples_.data(), samples_.size());
  submit_ready(true);
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return completed_ >= submitted_; });
  if (gone_) return close_output(StreamEnd::kGone, ending.reason, "");
  const double duration = double(segmenter_.samples_pushed()) / model_.sample_rate;
  if (failure_.empty()) {
    try {
      builder_.finish(segmenter_.segments_emitted(), duration);
    } catch (const std::exception& e) {
      failure_ = e.what();
    }
  }
  if (!failure_.empty()) return close_output(StreamEnd::kFailed, failure_, "");
  close_output(ending.how, ending.reason,
                 json{{"model", model_.name},
                      {"duration", rounded(duration, 1e3)},
                      {"segments", segmenter_.segments_emitted()},
                      {"events", events_.load()},
                      {"dropped", dropped_.load()},
                      {"end", stream_end_name(ending.how)}}
                     .dump());
}

void StreamSession::close_output(StreamEnd how, const std::string& reason, std::string summary) {
  closed_ = true;
  registry_.release();  // first: the client may open another stream as soon as it reads this one's end
  output_->close(how, reason, std::move(summary));
}

}  // namespace corepool
