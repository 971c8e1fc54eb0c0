// StreamSession: see stream_session.h. Locking: mu_ guards the queue, the
// ending and the EventBuilder; the stream's thread never holds it while it
// converts audio or while submit() blocks on a full executor queue, and the
// executor threads hold it only to fold a result in and post its events
// (WsSender posts to the HTTP mailbox, which never calls back).
#include "supervisor/serve/stream_session.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "audio/event_json.h"
#include "supervisor/http/websocket_frame.h"
#include "supervisor/serve/stream_registry.h"

namespace corepool {

using json = nlohmann::json;

StreamSession::StreamSession(uint64_t id, std::shared_ptr<Generation> generation, const PcmSpec& spec,
                             WsSender sender, StreamRegistry& registry, int idle_s)
    : id_(id),
      generation_(std::move(generation)),
      model_(generation_->model().config),
      spec_(spec),
      sender_(std::move(sender)),
      registry_(registry),
      idle_s_(idle_s),
      max_queue_bytes_(static_cast<size_t>(kQueueSeconds * spec.sample_rate) * static_cast<size_t>(spec.frame_bytes())),
      builder_(model_.labels, model_.thresholds, model_.segment_seconds, model_.hop_seconds,
               [this](const Event& e) {  // under mu_, from add() or finish()
                 if (gone_) return;
                 events_.fetch_add(1);
                 sender_.text(event_json(e).dump());
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
  thread_ = std::thread([this] { run(); });
}

StreamStat StreamSession::stat() const {
  return {id_, audio_seconds_.load(), events_.load(), dropped_.load()};
}

// ---- the loop thread (WsHandler) -------------------------------------------

void StreamSession::on_binary(std::string&& data) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ending_) return;
  if (queued_bytes_ + data.size() > max_queue_bytes_) {
    ending_ = Ending{ws::kPolicy,
                     "stream queue full: more than " + std::to_string(int(kQueueSeconds)) +
                         " s of audio waiting to be tagged; send no faster than the server tags",
                     "queue_full", false};
  } else {
    queued_bytes_ += data.size();
    queue_.push_back(std::move(data));
  }
  cv_.notify_one();
}

void StreamSession::on_text(std::string&& text) {
  const json message = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (message.is_object() && message.size() == 1 && message.contains("end") && message["end"] == true) {
    return end({ws::kNormal, "end of stream", "end", true});
  }
  end({ws::kUnsupportedData, "text messages: only {\"end\": true}; send audio as binary messages", "bad_text", false});
}

void StreamSession::on_client_close(std::uint16_t) { end({ws::kNormal, "end of stream", "client_close", true}); }

void StreamSession::on_idle() {
  end({ws::kNormal, "idle: no audio for " + std::to_string(idle_s_) + " s (serve.stream_idle_s)", "idle", true});
}

void StreamSession::on_server_stop() { end({ws::kGoingAway, "the server is shutting down", "server_stop", true}); }

void StreamSession::on_gone(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  gone_ = true;
  if (!ending_) ending_ = Ending{0, why, "gone", false};
  cv_.notify_one();
}

void StreamSession::end(Ending ending) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ending_) ending_ = std::move(ending);
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
  if (ending.flush) {
    flush_and_close(ending);
  } else {
    generation_->executor().cancel(executor_stream_);  // what is queued is not worth running
    std::lock_guard<std::mutex> lock(mu_);
    if (!gone_) sender_.close(ending.code, ending.reason);
  }
  generation_->close_stream(executor_stream_);
  // A reload retires the old generation once nothing holds it: not this
  // stream's registry entry, which lives until the next reap.
  generation_.reset();
  registry_.count_closed(ending.how);
  finished_.store(true);
}

// The next piece of PCM; false once the stream ends (a flushing end takes
// the pieces already queued first).
bool StreamSession::next_piece(std::string& piece) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !queue_.empty() || ending_; });
  if (queue_.empty() || (ending_ && !ending_->flush)) return false;
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
  if (!error.empty()) return end({ws::kInvalidPayload, error, "bad_audio", false});
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
  if (gone_) return;
  const double duration = double(segmenter_.samples_pushed()) / model_.sample_rate;
  if (failure_.empty()) {
    try {
      builder_.finish(segmenter_.segments_emitted(), duration);
    } catch (const std::exception& e) {
      failure_ = e.what();
    }
  }
  if (!failure_.empty()) return sender_.close(ws::kInternalError, failure_);
  sender_.text(json{{"summary",
                     {{"model", model_.name},
                      {"duration", rounded(duration, 1e3)},
                      {"segments", segmenter_.segments_emitted()},
                      {"events", events_.load()},
                      {"dropped", dropped_.load()},
                      {"end", ending.how}}}}
                   .dump());
  sender_.close(ending.code, ending.reason);
}

}  // namespace corepool
