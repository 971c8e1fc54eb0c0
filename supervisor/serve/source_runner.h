// One [[source]] of `corepool serve` (config/source_config.h): a thread that
// opens the source's URL with corepool's FFmpeg decoder (audio/), feeds the
// decoded audio to a StreamSession opened through an AudioStreams (the same
// stream logic as a WebSocket's), and writes the session's events to the
// source's sinks (event_sink.h). A drop (the server gone, a read silent for
// timeout_s, a decode error) flushes the open events and reconnects after a
// back-off (backoff.h); a file's end finishes the source. Every blocking call
// is bounded by FFmpeg's interrupt callback (an ALSA device is read
// non-blocking and the same check ends its waits), so stop() returns within
// about one segment's tagging. Made, started and stopped by SourceSet.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config/source_config.h"
#include "supervisor/serve/event_hub.h"
#include "supervisor/triton/serve_generation.h"
#include "supervisor/sources/event_sink.h"
#include "supervisor/triton/audio_streams.h"

namespace corepool {

class AudioDecoder;
struct AudioSource;
struct SourceShared;

enum class SourceState { kConnecting, kRunning, kBackoff, kFinished, kStopped };
const char* source_state_name(SourceState state);

// What /v2/sources and /metrics show of one source.
struct SourceStatus {
  std::string name;
  std::string url;
  SourceState state = SourceState::kConnecting;
  std::string last_error;       // "" until something failed
  std::string last_event;       // the last event written, as JSON ("" before the first)
  double audio_seconds = 0;     // decoded since start, every connection
  double lag_seconds = 0;       // audio of this connection whose events are not decided yet
  uint64_t events = 0;          // events written since start
  uint64_t connections = 0;     // connections opened (whether audio came or not)
  uint64_t reconnects = 0;      // attempts after a drop or a failed attempt
  uint64_t sink_failures = 0;   // lines a sink could not write
  double retry_in_s = 0;        // in backoff: until the next attempt
};

class SourceRunner {
 public:
  // `model`: the model the source's streams are opened for (serve's one);
  // `current`: the generation new streams go to. After a reload the running
  // connection moves its stream to the new generation between two pieces of
  // audio (the connection stays; an event open across the move is split).
  // `hub` (may be null) gets every line the sinks get (GET /v2/events).
  SourceRunner(SourceConfig config, AudioStreams& streams, std::string model,
               std::function<std::shared_ptr<Generation>()> current, EventHub* hub);
  ~SourceRunner();  // stop()
  SourceRunner(const SourceRunner&) = delete;
  SourceRunner& operator=(const SourceRunner&) = delete;

  void start();
  // Ends the current connection (its open events flushed to the sinks) and joins the thread.
  void stop();
  const SourceConfig& config() const { return config_; }
  SourceStatus status() const;

  // Audio waiting for its events beyond which the decoder pauses (a file
  // decodes far faster than real time; the stream's queue must not overflow).
  static constexpr double kMaxLagSeconds = 5;


 private:
  enum class Outcome { kEnded, kDropped, kStopped };

  void run();
  Outcome connect_once();
  std::unique_ptr<AudioDecoder> open_input(Outcome& failed);
  Outcome pump(AudioDecoder& decoder, std::vector<float>& frames, size_t n);
  std::string silence_reason() const;
  bool local_source(const std::function<bool()>& interrupted, AudioSource& source);
  struct Leg;
  bool wait_for_stream(Leg& leg, std::string& why);
  // A stream for the connection's audio from `offset_s` on; null (the error noted) when refused.
  std::shared_ptr<Leg> open_leg(int rate, int channels, uint64_t connection, double offset_s);
  void close_leg(Leg& leg, StreamEnd how, const std::string& why);  // flushes; waits for its last line
  bool wait_backoff(double seconds);  // false when stopped meanwhile
  void set_state(SourceState state);
  void fail(const std::string& error);
  bool stopping() const { return stop_.load(); }
  void touch();  // data arrived: the read deadline moves

  const SourceConfig config_;
  AudioStreams& streams_;
  const std::string model_;
  const std::function<std::shared_ptr<Generation>()> current_;
  std::shared_ptr<SourceShared> shared_;  // source_output.h
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> deadline_ns_{0};  // steady clock: a blocking read past it is interrupted
  std::atomic<bool> timed_out_{false};   // this connection's input was interrupted at its deadline
  bool regular_file_ = false;            // the runner thread: this connection reads a regular file
  double ran_s_ = 0;                     // the runner thread: how long the last connection ran (had audio)
  std::thread thread_;
};

}  // namespace corepool
