// One audio stream of `corepool serve`, whichever wire feeds it (a WebSocket
// at /v2/models/NAME/audio/stream, ws_stream.h; a sequence of gRPC's
// ModelStreamInfer, supervisor/grpc/grpc_stream.h): PCM in, events out as
// each closes. The wire pushes pieces and the end (AudioStream); the
// stream's own thread runs stage 2 (PcmStream: mix, resample; Segmenter) and
// submits the segments to its generation's executor, blocking while that
// queue is full; results come back on executor threads into an EventBuilder
// whose events go straight to the wire's StreamOutput. At the end (the
// client's, the idle timeout, the server's stop) the open events are flushed
// and the output is closed with the summary. Made by StreamRegistry::open(),
// held by the wire and by the registry, which joins its thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "audio/events.h"
#include "audio/pcm_stream.h"
#include "audio/segmenter.h"
#include "supervisor/triton/audio_streams.h"
#include "supervisor/triton/serve_generation.h"
#include "supervisor/triton/serve_metrics.h"

namespace corepool {

class StreamRegistry;

class StreamSession final : public AudioStream, public std::enable_shared_from_this<StreamSession> {
 public:
  // Audio waiting for the stream's thread, in seconds at the client's rate:
  // a client sending faster than this is tagged is ended (kQueueFull), not buffered.
  static constexpr double kQueueSeconds = 30;

  // Throws std::runtime_error when soxr refuses the rates.
  StreamSession(uint64_t id, std::shared_ptr<Generation> generation, const PcmSpec& spec,
                std::unique_ptr<StreamOutput> output, StreamRegistry& registry, int idle_s);
  ~StreamSession() override;

  void start() override;
  void push(std::string&& pcm) override;
  void end(StreamEnd how, std::string reason) override;  // kGone: nothing more is sent
  void dropped() override { dropped_.fetch_add(1); }

  StreamStat stat() const;
  bool finished() const { return finished_.load(); }
  void join();

 private:
  struct Ending {
    StreamEnd how;
    std::string reason;
  };

  void run();                           // the stream's thread
  bool next_piece(std::string& piece);  // false once the stream ends; ends it at the idle timeout
  void tag_piece(const std::string& piece);
  void submit_ready(bool last);
  void on_result(SegmentResult&& r);  // executor threads
  void flush_and_close(const Ending& ending);
  void close_output(StreamEnd how, const std::string& reason, std::string summary);  // under mu_; once

  const uint64_t id_;
  std::shared_ptr<Generation> generation_;  // released when the stream's thread ends
  const ModelConfig& model_;                // the stream's thread only, while generation_ is held
  const PcmSpec spec_;
  std::unique_ptr<StreamOutput> output_;  // under mu_; closed once, at the end
  StreamRegistry& registry_;
  const int idle_s_;
  const size_t max_queue_bytes_;
  uint64_t executor_stream_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;  // under mu_: PCM pieces not yet tagged
  size_t queued_bytes_ = 0;        // under mu_
  std::optional<Ending> ending_;   // under mu_
  std::chrono::steady_clock::time_point last_input_;  // under mu_: the idle timeout counts from here
  bool gone_ = false;              // under mu_: the connection is closed, nothing more can be sent
  bool closed_ = false;            // under mu_: the output had its last call
  uint64_t submitted_ = 0, completed_ = 0;  // under mu_
  std::set<uint64_t> done_ahead_;  // under mu_: results in, past the first missing index (for the lag)
  uint64_t done_below_ = 0;        // under mu_: every result below this index is in
  std::string failure_;            // under mu_: a segment's error
  EventBuilder builder_;           // under mu_

  // The stream's thread only:
  PcmStream pcm_;
  Segmenter segmenter_;
  std::vector<float> samples_;

  std::atomic<double> audio_seconds_{0};
  std::atomic<double> tagged_seconds_{0};  // the audio behind every result in (model rate)
  std::atomic<uint64_t> events_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace corepool
