// StreamSessionBase: see stream_session_base.h. Locking: mu_ guards the
// queue, the ending, the output and what a derived class says is under it; the
// stream's thread never holds it while it converts audio or while submit()
// blocks on a full executor queue, and the executor threads hold it only to
// fold a result in and hand its events to the output (which never blocks nor
// calls back).
#include "supervisor/serve/stream_session_base.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "audio/event_json.h"
#include "supervisor/serve/stream_registry.h"

namespace corepool {

StreamSessionBase::StreamSessionBase(uint64_t id, std::shared_ptr<Generation> generation, const PcmSpec& spec,
                                     std::unique_ptr<StreamOutput> output, StreamRegistry& registry, int idle_s)
    : id_(id),
      generation_(std::move(generation)),
      model_(generation_->model().config),
      spec_(spec),
      output_(std::move(output)),
      registry_(registry),
      idle_s_(idle_s),
      max_queue_bytes_(static_cast<size_t>(kQueueSeconds * spec.sample_rate) * static_cast<size_t>(spec.frame_bytes())),
      pcm_(spec, model_.sample_rate) {}

StreamSessionBase::~StreamSessionBase() { join(); }

void StreamSessionBase::join() {
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void StreamSessionBase::start() {
  // The sink holds the session: results that arrive after the stream closed are dropped by the generation.
  executor_stream_ = generation_->open_stream(
      [self = shared_from_this()](SegmentResult&& r) { self->on_result(std::move(r)); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_input_ = Clock::now();
    last_arrived_ = last_input_;
  }
  thread_ = std::thread([this] { run(); });
}

StreamStat StreamSessionBase::stat() const {
  const double audio = audio_seconds_.load();
  // Audio still in the queue was received too: a stream whose thread waits
  // for the engines shows its lag here before the queue fills and ends it.
  const double queued = static_cast<double>(queued_bytes_.load()) /
                        (static_cast<double>(spec_.sample_rate) * static_cast<double>(spec_.frame_bytes()));
  return {id_, audio, events_.load(), dropped_.load(), std::max(0.0, audio + queued - tagged_seconds_.load())};
}

// ---- the wire's threads (AudioStream) ----------------------------------------

void StreamSessionBase::push(std::string&& pcm) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ending_) return;
  last_input_ = Clock::now();
  if (queued_bytes_ + pcm.size() > max_queue_bytes_) {
    ending_ = Ending{StreamEnd::kQueueFull, "stream queue full: more than " + std::to_string(int(kQueueSeconds)) +
                                                " s of audio waiting to be tagged; send no faster than the server tags"};
  } else {
    queued_bytes_ += pcm.size();
    queue_.push_back({std::move(pcm), last_input_});
  }
  cv_.notify_one();
}

void StreamSessionBase::end(StreamEnd how, std::string reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (how == StreamEnd::kGone) gone_ = true;  // even after another ending: its summary cannot go out now
  if (!ending_) ending_ = Ending{how, std::move(reason)};
  cv_.notify_one();
}

// ---- the stream's thread ----------------------------------------------------

void StreamSessionBase::run() {
  Piece piece;
  for (Step step; (step = next_step(piece)) != Step::kEnd;) {
    if (step == Step::kPiece) tag_piece(piece);
    else on_wake();
  }
  Ending ending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ending = *ending_;
  }
  if (flushes(ending.how)) {
    samples_.clear();
    pcm_.finish(samples_);
    take_samples(samples_, last_arrived_, true);
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

// The next piece of PCM or wake-up; kEnd once the stream ends (a flushing end
// takes the pieces already queued first). No piece for serve.stream_idle_s
// ends it.
StreamSessionBase::Step StreamSessionBase::next_step(Piece& piece) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto ready = [this] { return !queue_.empty() || ending_ || woken_; };
  while (!ready()) {
    if (cv_.wait_until(lock, last_input_ + std::chrono::seconds(idle_s_)) == std::cv_status::timeout && !ready() &&
        Clock::now() >= last_input_ + std::chrono::seconds(idle_s_)) {
      ending_ = Ending{StreamEnd::kIdle, idle_reason(idle_s_)};
    }
  }
  if (woken_ && (!ending_ || flushes(ending_->how))) {
    woken_ = false;
    return Step::kWake;
  }
  if (queue_.empty() || !flushes(ending_ ? ending_->how : StreamEnd::kEnd)) return Step::kEnd;
  piece = std::move(queue_.front());
  queue_.pop_front();
  queued_bytes_ -= piece.pcm.size();
  return Step::kPiece;
}

void StreamSessionBase::tag_piece(const Piece& piece) {
  samples_.clear();
  std::string error;
  try {
    error = pcm_.push(piece.pcm, samples_);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!error.empty()) return end(StreamEnd::kBadAudio, error);
  audio_seconds_.store(pcm_.seconds_in());
  last_arrived_ = piece.arrived;
  take_samples(samples_, piece.arrived, false);
}

void StreamSessionBase::wake() {
  woken_ = true;
  cv_.notify_one();
}

void StreamSessionBase::send_event(const Event& e) {
  if (gone_ || closed_) return;  // results after a refusal: the output said its last
  events_.fetch_add(1);
  if (!output_->event(event_json(e).dump())) dropped_.fetch_add(1);
}

void StreamSessionBase::close_flushed(const Ending& ending, double duration, uint64_t segments) {
  if (gone_) return close_output(StreamEnd::kGone, ending.reason, "");
  if (!failure_.empty()) return close_output(StreamEnd::kFailed, failure_, "");
  close_output(ending.how, ending.reason,
               nlohmann::json{{"model", model_.name},
                              {"duration", rounded(duration, 1e3)},
                              {"segments", segments},
                              {"events", events_.load()},
                              {"dropped", dropped_.load()},
                              {"end", stream_end_name(ending.how)}}
                   .dump());
}

void StreamSessionBase::close_output(StreamEnd how, const std::string& reason, std::string summary) {
  closed_ = true;
  registry_.release();  // first: the client may open another stream as soon as it reads this one's end
  output_->close(how, reason, std::move(summary));
}

void StreamSessionBase::observe_decision(Clock::time_point arrived) {
  registry_.observe_decision(std::chrono::duration<double>(Clock::now() - arrived).count());
}

}  // namespace corepool
