// The answer to one API request: a Responder (the way back to the client's
// connection) that also records the request in /metrics when it is sent.
// Copyable and thread-safe like Responder; the first send wins.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "supervisor/http/http_server.h"
#include "supervisor/triton/serve_metrics.h"

namespace corepool {

class Reply {
 public:
  using Clock = std::chrono::steady_clock;

  Reply(Responder responder, std::string endpoint, ServeMetrics& metrics)
      : state_(std::make_shared<State>(std::move(responder), std::move(endpoint), metrics)) {}

  void send(HttpResponse response) const {
    if (state_->done.exchange(true)) return;
    const double seconds = std::chrono::duration<double>(Clock::now() - state_->start).count();
    state_->metrics.observe("http", state_->endpoint, response.status, seconds);
    state_->responder.send(std::move(response));
  }
  void json(int status, std::string body) const {
    HttpResponse r;
    r.status = status;
    r.body = std::move(body);
    send(std::move(r));
  }
  // {"error": message}; a 503 also tells the client when to come back.
  void error(int status, const std::string& message, int retry_after_s = 0) const {
    HttpResponse r;
    r.status = status;
    r.body = nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // a raw path may not be UTF-8
    if (retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(retry_after_s));
    send(std::move(r));
  }
  bool sent() const { return state_->done.load(); }
  // The connection's WebSocket sender, for a 101 answer that upgrades it.
  WsSender websocket() const { return state_->responder.websocket(); }
  // See Responder::on_close: `fn` runs if the client leaves before the answer.
  void on_close(std::function<void()> fn) const { state_->responder.on_close(std::move(fn)); }
  // The client is gone: nothing is sent; /metrics counts the request with
  // `code` (499, nginx's "client closed request").
  void abandon(int code) const {
    if (state_->done.exchange(true)) return;
    const double seconds = std::chrono::duration<double>(Clock::now() - state_->start).count();
    state_->metrics.observe("http", state_->endpoint, code, seconds);
    state_->responder.abandon();
  }

 private:
  struct State {
    State(Responder r, std::string e, ServeMetrics& m) : responder(std::move(r)), endpoint(std::move(e)), metrics(m) {}
    Responder responder;
    std::string endpoint;
    ServeMetrics& metrics;
    Clock::time_point start = Clock::now();
    std::atomic<bool> done{false};
  };
  std::shared_ptr<State> state_;
};

}  // namespace corepool
