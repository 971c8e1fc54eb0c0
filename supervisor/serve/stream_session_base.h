// What every audio stream of `corepool serve` shares, whatever its model
// does with the audio: the wire's side (AudioStream: pieces of PCM checked and
// queued up to kQueueSeconds, the first ending wins), the stream's own thread
// (the idle timeout, PCM mixed and resampled to the model's rate, the ending
// with or without a flush), the output closed once, and the counters for
// /metrics. A model kind's session derives from it: StreamSession (stateless:
// segments, EventBuilder), StatefulSession (a state from chunk to chunk,
// speech events). Made by StreamRegistry::open(), held by the wire and by the
// registry, which joins the thread; a derived class joins it in its own
// destructor too, since the thread runs its methods.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "audio/events.h"
#include "audio/pcm_stream.h"
#include "supervisor/triton/audio_streams.h"
#include "supervisor/triton/serve_generation.h"
#include "supervisor/triton/serve_metrics.h"

namespace corepool {

class StreamRegistry;

class StreamSessionBase : public AudioStream, public std::enable_shared_from_this<StreamSessionBase> {
 public:
  using Clock = std::chrono::steady_clock;
  // Audio waiting for the stream's thread, in seconds at the client's rate:
  // a client sending faster than this is tagged is ended (kQueueFull), not buffered.
  static constexpr double kQueueSeconds = 30;

  // Throws std::runtime_error when soxr refuses the rates.
  StreamSessionBase(uint64_t id, std::shared_ptr<Generation> generation, const PcmSpec& spec,
                    std::unique_ptr<StreamOutput> output, StreamRegistry& registry, int idle_s);
  ~StreamSessionBase() override;

  void start() override;
  void push(std::string&& pcm) override;
  void end(StreamEnd how, std::string reason) override;  // kGone: nothing more is sent
  void dropped() override { dropped_.fetch_add(1); }

  StreamStat stat() const;
  bool finished() const { return finished_.load(); }
  void join();

 protected:
  struct Ending {
    StreamEnd how;
    std::string reason;
  };

  // The stream's thread: samples at the model's rate, the last of which
  // arrived at the server at `arrived`. `last`: the tail, after a flushing end.
  virtual void take_samples(const std::vector<float>& samples, Clock::time_point arrived, bool last) = 0;
  // The stream's thread, woken by wake(): e.g. a result came back and the next chunk may go.
  virtual void on_wake() {}
  // Executor threads: a result of this stream.
  virtual void on_result(SegmentResult&& r) = 0;
  // The stream's thread, after the tail was taken: wait for every result,
  // send what is open, close the output (close_output, or flushed_summary).
  virtual void flush_and_close(const Ending& ending) = 0;

  void wake();  // requires mu_: on_wake() runs soon on the stream's thread
  // Under mu_: one event to the wire (not after the output closed).
  void send_event(const Event& e);
  void close_output(StreamEnd how, const std::string& reason, std::string summary);  // under mu_; once
  // Under mu_: the summary's JSON text, or the failure's close.
  void close_flushed(const Ending& ending, double duration, uint64_t segments);
  // Under mu_ or not: how long a decision took, for /metrics.
  void observe_decision(Clock::time_point arrived);

  const uint64_t id_;
  std::shared_ptr<Generation> generation_;  // released when the stream's thread ends
  const ModelConfig& model_;                // while generation_ is held
  uint64_t executor_stream_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool gone_ = false;    // under mu_: the connection is closed, nothing more can be sent
  bool closed_ = false;  // under mu_: the output had its last call
  std::string failure_;  // under mu_: a segment's or chunk's error

  std::atomic<double> audio_seconds_{0};
  std::atomic<double> tagged_seconds_{0};  // the audio behind every result in (model rate)
  std::atomic<uint64_t> events_{0};
  std::atomic<uint64_t> dropped_{0};

 private:
  struct Piece {
    std::string pcm;
    Clock::time_point arrived;
  };
  enum class Step { kPiece, kWake, kEnd };

  void run();                      // the stream's thread
  Step next_step(Piece& piece);    // kEnd once the stream ends; ends it at the idle timeout
  void tag_piece(const Piece& piece);

  const PcmSpec spec_;
  std::unique_ptr<StreamOutput> output_;  // under mu_; closed once, at the end
  StreamRegistry& registry_;
  const int idle_s_;
  const size_t max_queue_bytes_;

  std::deque<Piece> queue_;        // under mu_: PCM pieces not yet tagged
  std::atomic<size_t> queued_bytes_{0};  // changed under mu_; stat() reads it without
  std::optional<Ending> ending_;   // under mu_
  Clock::time_point last_input_;   // under mu_: the idle timeout counts from here
  bool woken_ = false;             // under mu_

  // The stream's thread only:
  PcmStream pcm_;
  std::vector<float> samples_;
  Clock::time_point last_arrived_;

  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace corepool
