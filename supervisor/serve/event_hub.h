// GET /v2/events: the live events of every audio stream (WebSocket, gRPC)
// and every [[source]] as Server-Sent Events. Streams are tapped where they
// open (StreamRegistry's tap, a StreamOutput decorator); sources publish the
// lines they write. Each subscriber is an HTTP connection kept open
// (HttpResponse::event_stream); publishing posts to the HTTP loop and never
// blocks: a subscriber that does not read has its events dropped and counted
// once its backlog passes HttpServerOptions::ws_max_backlog_bytes. Owned by
// ServeProcess, declared before the HTTP server that holds its subscribers.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "supervisor/http/websocket_session.h"
#include "supervisor/triton/audio_streams.h"

namespace corepool {

class EventHub {
 public:
  static constexpr size_t kMaxSubscribers = 64;

  // "event: NAME\ndata: JSON\n\n" to every subscriber. Any thread.
  void publish(const std::string& name, const std::string& json);
  // A handler for a new subscriber's connection, or null when kMaxSubscribers are open.
  std::shared_ptr<WsHandler> subscribe(WsSender sender);
  // `inner` with every event and its summary also published ("event", "end"),
  // tagged {"stream": N, "model": MODEL}.
  std::unique_ptr<StreamOutput> tap(std::unique_ptr<StreamOutput> inner, const std::string& model);

  uint64_t published() const { return published_.load(); }
  uint64_t dropped() const { return dropped_.load(); }
  size_t subscribers() const;

  class Subscriber;  // event_hub.cc

 private:
  friend class Subscriber;
  void remove(const Subscriber* s);

  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Subscriber>> subscribers_;  // under mu_
  std::atomic<uint64_t> streams_{0};
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace corepool
