// The hand-off from any thread to HttpServer's loop thread: Responders post
// finished responses, stop() posts the stop request, and a uv_async_t wakes the
// loop. Shared (shared_ptr) by the server and every Responder, so a Responder
// that outlives the server posts into a closed mailbox: a harmless no-op.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include "supervisor/http/http_types.h"

namespace corepool::http {

// A frame for an upgraded connection (WsSender): sent as is; `close` marks
// the close frame, after which the connection closes.
struct WsOut {
  std::string frame;
  bool close = false;
};

struct Delivery {
  std::uint64_t connection_id = 0;
  std::uint64_t request_seq = 0;  // which request of that connection it answers
  HttpResponse response;
  std::optional<WsOut> ws;  // set: a WebSocket frame, not an answer
};

class Mailbox {
 public:
  explicit Mailbox(uv_async_t* wake) : wake_(wake) {}

  // False when the loop is gone. uv_async_send runs under the lock so that
  // close() (which takes it) cannot slip in between and free the handle.
  bool post(Delivery delivery) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_) return false;
    queue_.push_back(std::move(delivery));
    uv_async_send(wake_);
    return true;
  }

  void request_stop(std::chrono::milliseconds drain) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_) return;
    stop_ = drain;
    uv_async_send(wake_);
  }

  // Loop thread: everything posted so far, and the stop request if any.
  std::pair<std::deque<Delivery>, std::optional<std::chrono::milliseconds>> take() {
    std::lock_guard<std::mutex> lock(mu_);
    return {std::exchange(queue_, {}), std::exchange(stop_, std::nullopt)};
  }

  // Loop thread, just before uv_close(wake_): later posts are dropped.
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
    queue_.clear();
  }

 private:
  std::mutex mu_;
  uv_async_t* wake_;  // valid while open_
  bool open_ = true;
  std::deque<Delivery> queue_;
  std::optional<std::chrono::milliseconds> stop_;
};

}  // namespace corepool::http
