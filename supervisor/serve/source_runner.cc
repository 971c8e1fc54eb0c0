// SourceRunner: see source_runner.h. Threads: the runner's own (connects,
// decodes, pushes, waits out the back-off) and the session's (whose output,
// source_output.h, writes the sinks under SourceShared::mu). status() may be
// called from any thread.
#include "supervisor/serve/source_runner.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include <spdlog/spdlog.h>

#include "audio/audio_decoder.h"
#include "audio/audio_error.h"
#include "audio/audio_source.h"
#include "supervisor/serve/source_output.h"
#include "supervisor/sources/backoff.h"
#include "supervisor/serve/stream_session_base.h"

namespace corepool {

using Steady = std::chrono::steady_clock;

const char* source_state_name(SourceState state) {
  switch (state) {
    case SourceState::kConnecting: return "connecting";
    case SourceState::kRunning: return "running";
    case SourceState::kBackoff: return "backoff";
    case SourceState::kFinished: return "finished";
    case SourceState::kStopped: return "stopped";
  }
  return "unknown";
}

// One stream of a connection: one per generation it ran on.
struct SourceRunner::Leg {
  std::shared_ptr<AudioStream> stream;
  std::shared_ptr<StreamSessionBase> session;  // for its lag (null for another kind of stream)
  std::shared_ptr<LegEnd> end;
  const Generation* generation = nullptr;  // the one current when it opened
};

namespace {

std::string format_seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now().time_since_epoch()).count();
}

}  // namespace

SourceRunner::SourceRunner(SourceConfig config, AudioStreams& streams, std::string model,
                           std::function<std::shared_ptr<Generation>()> current, EventHub* hub)
    : config_(std::move(config)),
      streams_(streams),
      model_(std::move(model)),
      current_(std::move(current)),
      shared_(std::make_shared<SourceShared>()) {
  shared_->name = config_.name;
  shared_->hub = hub;
  shared_->status.name = config_.name;
  shared_->status.url = config_.url;
  for (const EventSinkSpec& sink : config_.events) {
    shared_->sinks.push_back(sink.kind == EventSinkSpec::Kind::kJsonl
                                 ? make_jsonl_sink(sink.target)
                                 : make_webhook_sink(sink.target, config_.backoff_s, config_.backoff_max_s));
  }
}

SourceRunner::~SourceRunner() { stop(); }

void SourceRunner::start() {
  thread_ = std::thread([this] { run(); });
}

void SourceRunner::stop() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    stop_.store(true);
    shared_->cv.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

SourceStatus SourceRunner::status() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  SourceStatus s = shared_->status;
  if (auto session = shared_->session.lock()) s.lag_seconds = session->stat().lag_seconds;
  if (s.state == SourceState::kBackoff) {
    s.retry_in_s = std::max(0.0, std::chrono::duration<double>(shared_->retry_at - Steady::now()).count());
  }
  for (const auto& sink : shared_->sinks) s.sink_failures += sink->failed();
  return s;
}

void SourceRunner::set_state(SourceState state) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->status.state = state;
}

void SourceRunner::fail(const std::string& error) {
  spdlog::warn("source \"{}\": {}", config_.name, error);
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->status.last_error = error;
}

void SourceRunner::touch() {
  deadline_ns_.store(steady_ns() + int64_t(config_.timeout_s * 1e9));
}

// Connect, run until the connection drops, wait, again. A connection that
// ran (audio came) for min(backoff_max_s, 30 s) was healthy: the next wait
// starts from backoff_s. Time spent failing to connect never counts.
void SourceRunner::run() {
  Backoff backoff(config_.backoff_s, config_.backoff_max_s);
  const double healthy_s = std::min(config_.backoff_max_s, 30.0);
  for (bool first = true; !stopping(); first = false) {
    if (!first) {
      std::lock_guard<std::mutex> lock(shared_->mu);
      ++shared_->status.reconnects;
    }
    set_state(SourceState::kConnecting);
    ran_s_ = 0;
    const Outcome outcome = connect_once();
    if (outcome == Outcome::kStopped || stopping()) break;
    if (outcome == Outcome::kEnded && regular_file_) {
      spdlog::info("source \"{}\": {} ended: finished", config_.name, config_.url);
      return set_state(SourceState::kFinished);
    }
    if (ran_s_ >= healthy_s) backoff.reset();
    if (!wait_backoff(backoff.next())) break;
  }
  set_state(SourceState::kStopped);
}

bool SourceRunner::wait_backoff(double seconds) {
  std::unique_lock<std::mutex> lock(shared_->mu);
  shared_->status.state = SourceState::kBackoff;
  shared_->retry_at = Steady::now() + std::chrono::microseconds(int64_t(seconds * 1e6));
  spdlog::info("source \"{}\": reconnecting in {:.2f} s", config_.name, seconds);
  return !shared_->cv.wait_until(lock, shared_->retry_at, [this] { return stopping(); });
}

// One connection: open, decode the first frames (they tell the rate and the
// channels), open a stream for them, push until the input ends, drops or
// the runner stops; then end the stream, which flushes its open events to the
// sinks, and wait for its last line.
SourceRunner::Outcome SourceRunner::connect_once() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    ++shared_->status.connections;
  }
  Outcome failed = Outcome::kDropped;
  std::unique_ptr<AudioDecoder> decoder = open_input(failed);
  if (!decoder) return failed;
  std::vector<float> frames;
  size_t n = 0;
  try {
    n = decoder->read(frames);
  } catch (const AudioError& e) {
    if (stopping()) return Outcome::kStopped;
    fail(e.what());
    return Outcome::kDropped;
  }
  if (n == 0) {
    if (stopping()) return Outcome::kStopped;
    fail(config_.url + ": no audio before the end of the stream");
    return regular_file_ ? Outcome::kEnded : Outcome::kDropped;
  }
  return pump(*decoder, frames, n);
}

// The input and its decoder, or null with `failed` saying how it ended.
std::unique_ptr<AudioDecoder> SourceRunner::open_input(Outcome& failed) {
  touch();
  timed_out_.store(false);
  const auto interrupted = [this] {
    if (stopping()) return true;
    if (steady_ns() <= deadline_ns_.load()) return false;
    timed_out_.store(true);  // sticky: the decoder may still hand out buffered frames before it reports the end
    return true;
  };
  // FFmpeg's rw_timeout is a backstop one second behind the deadline, so that
  // the interrupt (which says why) is what ends a silent read.
  const int timeout_ms = int(config_.timeout_s * 1000) + 1000;
  failed = Outcome::kDropped;
  std::unique_ptr<MediaInput> input;
  if (config_.is_alsa()) {
    const AlsaUrl alsa = parse_alsa_url(config_.url);  // checked when the config was read
    input = std::make_unique<MediaInput>(
        AudioSource::capture("alsa", alsa.device, alsa.sample_rate, alsa.channels, interrupted));
  } else if (AudioSource source; local_source(interrupted, source)) {
    input = std::make_unique<MediaInput>(source);
  } else if (source.name.empty()) {
    return nullptr;  // local_source() said why
  } else {
    input = std::make_unique<MediaInput>(AudioSource::network(config_.url, timeout_ms, interrupted));
  }
  failed = stopping() ? Outcome::kStopped : Outcome::kDropped;
  if (!input->get()) {
    if (!stopping()) {
      const bool nothing = input->is_pipe() && input->pipe_bytes() == 0;  // a FIFO with no writer yet
      fail(config_.url + ": cannot open: " +
           (timed_out_.load() ? "no answer within timeout_s (" + format_seconds(config_.timeout_s) + " s)"
            : nothing         ? std::string("nothing to read (no writer, or it wrote nothing)")
                              : input->error_text()));
    }
    return nullptr;
  }
  try {
    return std::make_unique<AudioDecoder>(std::move(input), config_.url, 0, false);
  } catch (const AudioError& e) {
    if (!stopping()) fail(e.what());
    return nullptr;
  }
}

// A regular file is read as batch reads it, and its end is the source's.
// Anything else local (pipe:N, a FIFO, a device) is read through a
// non-blocking descriptor of ours, polled, so that a silent writer cannot
// block a stop; its end is a drop. False with `source` filled: not local (a
// URL for FFmpeg's protocols); false with `source.name` empty: it failed.
bool SourceRunner::local_source(const std::function<bool()>& interrupted, AudioSource& source) {
  regular_file_ = false;
  source.name = config_.url;
  int fd = -1;
  if (config_.url.rfind("pipe:", 0) == 0) {
    const std::string number = config_.url.substr(5);
    fd = ::fcntl(number.empty() ? 0 : std::stoi(number), F_DUPFD_CLOEXEC, 3);  // config: digits only
  } else if (config_.is_file()) {
    struct stat st {};
    if (::stat(config_.url.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
      fd = ::open(config_.url.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO opens at once, writer or not
    } else {
      regular_file_ = true;
      source = AudioSource::file(config_.url);
      return true;
    }
  } else {
    return false;
  }
  if (fd < 0) {
    if (!stopping()) fail(config_.url + ": cannot open: " + std::strerror(errno));
    source.name.clear();
    return false;
  }
  source = AudioSource::descriptor(config_.url, fd, interrupted);
  return true;
}

std::string SourceRunner::silence_reason() const {
  return "no audio for timeout_s (" + format_seconds(config_.timeout_s) + " s)";
}

// Pushes `frames` and what follows until the input ends, drops, its stream
// ends or the runner stops; moves the stream to a new generation after a
// reload; then ends the stream and waits for its last line.
SourceRunner::Outcome SourceRunner::pump(AudioDecoder& decoder, std::vector<float>& frames, size_t n) {
  const int rate = decoder.decoded_rate();
  const int channels = decoder.channels();
  uint64_t connection = 0;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    connection = shared_->status.connections;
  }
  std::shared_ptr<Leg> leg = open_leg(rate, channels, connection, 0);
  if (!leg) return stopping() ? Outcome::kStopped : Outcome::kDropped;
  spdlog::info("source \"{}\": connected to {} ({} Hz, {} channels)", config_.name, config_.url, rate, channels);
  Outcome outcome = Outcome::kEnded;
  std::string why = "end of stream";
  double seconds = 0;  // of this connection
  const auto running_since = Steady::now();
  for (;;) {
    leg->stream->push(std::string(reinterpret_cast<const char*>(frames.data()), frames.size() * sizeof(float)));
    seconds += double(n) / rate;
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      shared_->status.audio_seconds += double(n) / rate;
    }
    if (!wait_for_stream(*leg, why)) {
      outcome = Outcome::kDropped;
      break;
    }
    if (stopping()) {
      outcome = Outcome::kStopped;
      break;
    }
    if (current_ && current_().get() != leg->generation) {  // a reload: on to the new generation
      close_leg(*leg, StreamEnd::kEnd, "reload: the stream moves to the new generation");
      leg = open_leg(rate, channels, connection, seconds);
      if (!leg) return stopping() ? Outcome::kStopped : Outcome::kDropped;
    }
    frames.clear();
    touch();
    try {
      n = decoder.read(frames);
    } catch (const AudioError& e) {
      outcome = stopping() ? Outcome::kStopped : Outcome::kDropped;
      why = timed_out_.load() ? silence_reason() : e.what();
      break;
    }
    if (n == 0) {
      if (stopping()) outcome = Outcome::kStopped;
      else if (decoder.ended_damaged() || !regular_file_) outcome = Outcome::kDropped;
      if (decoder.ended_damaged()) why = decoder.end_reason();
      if (timed_out_.load()) why = silence_reason();
      break;
    }
  }
  ran_s_ = std::chrono::duration<double>(Steady::now() - running_since).count();
  if (outcome == Outcome::kStopped) close_leg(*leg, StreamEnd::kServerStop, "the server is shutting down");
  else close_leg(*leg, StreamEnd::kEnd, why);
  if (outcome == Outcome::kDropped) fail(why.rfind(config_.url, 0) == 0 ? why : config_.url + ": " + why);
  return outcome;
}

// A file decodes far faster than it is tagged: wait while the stream is
// kMaxLagSeconds behind (or until a stop). False when the stream ended on
// its own (a full queue, a failed segment), `why` then saying so.
bool SourceRunner::wait_for_stream(Leg& leg, std::string& why) {
  std::unique_lock<std::mutex> lock(shared_->mu);
  while (leg.session && !leg.end->closed && !stopping() && leg.session->stat().lag_seconds > kMaxLagSeconds) {
    shared_->cv.wait_for(lock, std::chrono::milliseconds(10));
  }
  if (!leg.end->closed) return true;
  why = "the stream ended: " + std::string(stream_end_name(leg.end->how)) +
        (leg.end->reason.empty() ? "" : ": " + leg.end->reason);
  return false;
}

std::shared_ptr<SourceRunner::Leg> SourceRunner::open_leg(int rate, int channels, uint64_t connection,
                                                          double offset_s) {
  auto leg = std::make_shared<Leg>();
  leg->end = std::make_shared<LegEnd>();
  leg->generation = current_ ? current_().get() : nullptr;
  AudioStreams::Opened opened =
      streams_.open(model_, "sample_rate=" + std::to_string(rate) + "&channels=" + std::to_string(channels) +
                                "&format=f32le",
                    make_source_output(shared_, leg->end, connection, offset_s, !regular_file_));
  if (!opened.status.ok()) {
    fail("cannot open a stream: " + opened.status.message);
    return nullptr;
  }
  leg->stream = std::move(opened.stream);
  leg->session = std::dynamic_pointer_cast<StreamSessionBase>(leg->stream);
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->session = leg->session;
    shared_->status.state = SourceState::kRunning;
  }
  leg->stream->start();
  return leg;
}

void SourceRunner::close_leg(Leg& leg, StreamEnd how, const std::string& why) {
  leg.stream->end(how, why);
  std::unique_lock<std::mutex> lock(shared_->mu);
  shared_->cv.wait(lock, [&] { return leg.end->closed; });
  shared_->session.reset();
}

}  // namespace corepool
