// Decoder threads take one request body at a time; the request's TagState
// collects its results (on executor threads) and answers once the last
// segment is in. The state holds the generation until then, so a reload
// never tears down the executor under a request.
#include "supervisor/serve/serve_audio.h"

#include <chrono>
#include <optional>

#include <spdlog/spdlog.h>

#include "audio/event_json.h"
#include "audio/audio_error.h"
#include "audio/audio_stream.h"
#include "audio/events.h"
#include "audio/segmenter.h"
#include "supervisor/triton/stateful_refusal.h"

namespace corepool {
namespace {

using json = nlohmann::json;
constexpr const char* kBodyName = "request body";

class TagState {
 public:
  TagState(std::shared_ptr<Generation> generation, Reply reply, std::shared_ptr<std::atomic<uint64_t>> cancelled)
      : generation_(std::move(generation)), reply_(std::move(reply)), cancelled_(std::move(cancelled)),
        builder_(model().labels, model().thresholds, model().segment_seconds, model().hop_seconds,
                 [this](const Event& e) { events_.push_back(event_json(e)); }, model().quiet_index()) {}

  void set_stream(uint64_t id) { stream_ = id; }
  void submitted() {
    std::lock_guard<std::mutex> lock(mu_);
    ++submitted_;
  }
  void on_result(SegmentResult&& r);
  // Decoding is over: `total` segments, `duration` seconds of audio (with the
  // stretches that could not be decoded), or an error.
  void end_reading(uint64_t total, double duration, std::vector<SkippedStretch> skipped, int status,
                   const std::string& error);
  // The client left: queued segments dropped, nothing sent, counted.
  void cancel();

 private:
  const ModelConfig& model() const { return generation_->model().config; }
  void fail(int status, const std::string& error) {  // requires mu_
    if (status_ == 200) status_ = status, error_ = error;
  }
  void maybe_finish();  // requires mu_

  std::shared_ptr<Generation> generation_;  // reset once answered (or cancelled)
  Reply reply_;
  const std::shared_ptr<std::atomic<uint64_t>> cancelled_;
  std::mutex mu_;
  EventBuilder builder_;
  json events_ = json::array();
  uint64_t stream_ = 0;
  uint64_t submitted_ = 0, completed_ = 0, total_ = 0;
  double duration_ = 0;
  std::vector<SkippedStretch> skipped_;
  bool reading_done_ = false;
  int status_ = 200;
  std::string error_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

void TagState::cancel() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!generation_) return;
  const std::shared_ptr<Generation> gen = std::move(generation_);
  if (stream_) gen->close_stream(stream_);  // first: thread mode completes cancelled tasks inside cancel()
  lock.unlock();
  if (stream_) gen->executor().cancel(stream_);
  cancelled_->fetch_add(1);
  reply_.abandon(499);
}

void TagState::on_result(SegmentResult&& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!generation_) return;  // cancelled
  ++completed_;
  if (!r.error.empty()) fail(500, "segment " + std::to_string(r.index) + ": " + r.error);
  if (status_ == 200) {
    try {
      builder_.add(r.index, r.scores);
    } catch (const std::exception& e) {
      fail(500, std::string("segment ") + std::to_string(r.index) + ": " + e.what());
    }
  }
  maybe_finish();
}

void TagState::end_reading(uint64_t total, double duration, std::vector<SkippedStretch> skipped, int status,
                           const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  reading_done_ = true;
  total_ = total;
  duration_ = duration;
  skipped_ = std::move(skipped);
  if (status != 200) fail(status, error);
  maybe_finish();
}

void TagState::maybe_finish() {
  if (!reading_done_ || completed_ < submitted_ || !generation_) return;
  if (status_ == 200) {
    try {
      builder_.finish(total_, duration_);
    } catch (const std::exception& e) {
      fail(500, e.what());
    }
  }
  if (status_ == 200) {
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    json answer = {{"model", model().name},
                   {"duration", rounded(duration_, 1e3)},
                   {"segments", total_},
                   {"wall_seconds", rounded(wall, 1e3)},
                   {"events", std::move(events_)}};
    // As batch's summary: what could not be decoded, and where (a damaged
    // stretch costs that stretch, not the request).
    if (!skipped_.empty()) answer["skipped"] = skipped_json(skipped_);
    reply_.json(200, answer.dump());
  } else {
    reply_.error(status_, error_);
  }
  if (stream_) generation_->close_stream(stream_);
  generation_.reset();  // never the last reference: the server keeps every generation until it is idle
}

int status_of(const AudioError& e) { return e.kind() == AudioErrorKind::kNotAudio ? 415 : 400; }

}  // namespace

void AudioCancel::cancel() {
  std::function<void()> fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) return;
    cancelled_ = true;
    fn = std::move(on_cancel_);
  }
  if (fn) fn();
}

bool AudioCancel::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

void AudioCancel::set_on_cancel(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!cancelled_ || !fn) {
      on_cancel_ = std::move(fn);
      return;
    }
  }
  fn();
}

AudioTagger::AudioTagger(int threads, size_t max_pending) : max_pending_(max_pending) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { run(); });
}

AudioTagger::~AudioTagger() { stop(); }

bool AudioTagger::enqueue(Job&& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || queue_.size() + decoding_ >= max_pending_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

size_t AudioTagger::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + decoding_;
}

void AudioTagger::stop() {
  std::deque<Job> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    left.swap(queue_);
  }
  cv_.notify_all();
  for (Job& job : left) job.reply.error(503, "the server is shutting down", 1);
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void AudioTagger::run() {
  for (;;) {
    std::optional<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job.emplace(std::move(queue_.front()));
      queue_.pop_front();
      ++decoding_;
    }
    tag(*job);
    job.reset();  // drop the body and the generation before counting the job done
    std::lock_guard<std::mutex> lock(mu_);
    --decoding_;
  }
}

// Stages 1-2 on this thread; the body is released as soon as it is decoded.
// A cancelled job stops decoding at its next segment.
void AudioTagger::tag(Job& job) {
  const ModelConfig& model = job.generation->model().config;
  if (job.cancel->cancelled()) {  // the client left while the job was queued
    cancelled_->fetch_add(1);
    job.reply.abandon(499);
    return;
  }
  if (model.is_stateful()) {  // its chunks need a stream's state carried between them
    job.reply.error(400, stateful_refusal(model.name));
    return;
  }
  std::unique_ptr<AudioStream> stream;
  try {
    stream = std::make_unique<AudioStream>(kBodyName, std::move(job.body), model.sample_rate);
  } catch (const AudioError& e) {
    job.reply.error(status_of(e), e.what());
    return;
  }
  auto state = std::make_shared<TagState>(job.generation, job.reply, cancelled_);
  Generation& gen = *job.generation;
  const uint64_t id = gen.open_stream([state](SegmentResult&& r) { state->on_result(std::move(r)); });
  state->set_stream(id);
  job.cancel->set_on_cancel([weak = std::weak_ptr<TagState>(state)] {
    if (auto s = weak.lock()) s->cancel();
  });
  Segmenter segmenter(model.segment_samples(), model.hop_samples());
  int status = 200;
  std::string error;
  try {
    std::vector<float> block;
    Segment segment;
    auto submit = [&] {
      if (job.cancel->cancelled()) return;  // the client left: the rest is not worth running
      state->submitted();
      gen.executor().submit({id, segment.index, std::move(segment.samples)});
    };
    while (!job.cancel->cancelled() && stream->read(block)) {
      segmenter.push(block.data(), block.size());
      block.clear();
      while (segmenter.next(segment)) submit();
    }
    while (!job.cancel->cancelled() && segmenter.finish(segment)) submit();
  } catch (const AudioError& e) {
    status = status_of(e);
    error = e.what();
  } catch (const std::exception& e) {
    status = 500;
    error = std::string(kBodyName) + ": " + e.what();
    spdlog::error("audio:tag: {}", error);
  }
  std::vector<SkippedStretch> skipped = stream->skipped();
  stream.reset();
  state->end_reading(segmenter.segments_emitted(), static_cast<double>(segmenter.samples_pushed()) / model.sample_rate,
                     std::move(skipped), status, error);
}

}  // namespace corepool
