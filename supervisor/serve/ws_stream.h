// The WebSocket side of an audio stream (/v2/models/NAME/audio/stream): the
// connection's WsHandler, which turns frames into the stream's pieces and
// ends, and the StreamOutput that turns its events, summary and end into
// text frames and a close frame with its RFC 6455 code. Made by the route at
// the upgrade (serve_stream_route.cc); the connection holds the handler,
// the handler holds the stream, the stream holds the output.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "supervisor/http/websocket_session.h"
#include "supervisor/triton/audio_streams.h"

namespace corepool {

class WsStreamOutput final : public StreamOutput {
 public:
  explicit WsStreamOutput(WsSender sender) : sender_(std::move(sender)) {}
  bool event(std::string json) override;
  // {"summary": {...}} when flushed, then the close frame (1000, 1001, 1003, 1007, 1008 or 1011).
  void close(StreamEnd how, const std::string& reason, std::string summary) override;

 private:
  const WsSender sender_;
};

class WsStreamHandler final : public WsHandler {
 public:
  WsStreamHandler(std::shared_ptr<AudioStream> stream, int idle_s) : stream_(std::move(stream)), idle_s_(idle_s) {}
  void on_text(std::string&& text) override;  // only {"end": true}
  void on_binary(std::string&& data) override { stream_->push(std::move(data)); }
  void on_client_close(std::uint16_t) override {
    ended_.store(true);
    stream_->end(StreamEnd::kClientClose, "end of stream");
  }
  // The connection's idle timer; the stream keeps its own, of the same length (serve.stream_idle_s).
  void on_idle() override { stream_->end(StreamEnd::kIdle, idle_reason(idle_s_)); }
  void on_server_stop() override { stream_->end(StreamEnd::kServerStop, "the server is shutting down"); }
  void on_dropped() override { stream_->dropped(); }
  void on_gone(const std::string& why) override { stream_->end(StreamEnd::kGone, why); }
  // After {"end": true} or the client's close frame the stream tags what it
  // holds, however long that takes under load, then sends its summary and close.
  bool finishing() const override { return ended_.load(); }

 private:
  const std::shared_ptr<AudioStream> stream_;
  const int idle_s_;
  std::atomic<bool> ended_{false};  // the client ended its side
};

}  // namespace corepool
