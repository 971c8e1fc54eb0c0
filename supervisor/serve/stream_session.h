// One WebSocket audio stream (/v2/models/NAME/audio/stream): PCM in, events
// out as each closes. The loop thread hands it messages (WsHandler); its own
// thread runs stage 2 (PcmStream: mix, resample; Segmenter) and submits the
// segments to its generation's executor, blocking while that queue is full;
// results come back on executor threads into an EventBuilder whose events go
// straight to the client as text frames. At the end (the client's {"end":
// true} or close frame, the idle timeout, the server's stop) the open events
// are flushed, a {"summary": ...} frame follows and the stream closes.
// Made by ServeRoutes at the upgrade, held by the connection (as its handler)
// and by the StreamRegistry, which joins its thread.
#pragma once

#include <atomic>
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
#include "audio/segmenter.h"
#include "supervisor/http/websocket_session.h"
#include "supervisor/triton/serve_generation.h"
#include "supervisor/triton/serve_metrics.h"

namespace corepool {

class StreamRegistry;

class StreamSession final : public WsHandler, public std::enable_shared_from_this<StreamSession> {
 public:
  // Audio waiting for the stream's thread, in seconds at the client's rate:
  // a client sending faster than this is tagged is closed (1008), not buffered.
  static constexpr double kQueueSeconds = 30;

  StreamSession(uint64_t id, std::shared_ptr<Generation> generation, const PcmSpec& spec, WsSender sender,
                StreamRegistry& registry, int idle_s);
  ~StreamSession() override;
  void start();  // the stream's thread; call once, after the 101 was sent

  void on_text(std::string&& text) override;
  void on_binary(std::string&& data) override;
  void on_client_close(std::uint16_t code) override;
  void on_idle() override;
  void on_server_stop() override;
  void on_dropped() override { dropped_.fetch_add(1); }
  void on_gone(const std::string& why) override;

  StreamStat stat() const;
  bool finished() const { return finished_.load(); }
  void join();

 private:
  struct Ending {
    std::uint16_t code;
    std::string reason;  // for the close frame
    std::string how;     // for the summary and /metrics: "end", "client_close", "idle", ...
    bool flush;          // flush open events and send the summary first
  };

  void end(Ending ending);  // any thread: the first ending wins
  void run();               // the stream's thread
  bool next_piece(std::string& piece);  // false once the stream ends
  void tag_piece(const std::string& piece);
  void submit_ready(bool last);
  void on_result(SegmentResult&& r);  // executor threads
  void flush_and_close(const Ending& ending);

  const uint64_t id_;
  std::shared_ptr<Generation> generation_;  // released when the stream's thread ends
  const ModelConfig& model_;                // the stream's thread only, while generation_ is held
  const PcmSpec spec_;
  const WsSender sender_;
  StreamRegistry& registry_;
  const int idle_s_;
  const size_t max_queue_bytes_;
  uint64_t executor_stream_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;  // under mu_: PCM pieces not yet tagged
  size_t queued_bytes_ = 0;        // under mu_
  std::optional<Ending> ending_;   // under mu_
  bool gone_ = false;              // under mu_: the connection is closed, nothing more can be sent
  uint64_t submitted_ = 0, completed_ = 0;  // under mu_
  std::string failure_;            // under mu_: a segment's error
  EventBuilder builder_;           // under mu_

  // The stream's thread only:
  PcmStream pcm_;
  Segmenter segmenter_;
  std::vector<float> samples_;

  std::atomic<double> audio_seconds_{0};
  std::atomic<uint64_t> events_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace corepool
