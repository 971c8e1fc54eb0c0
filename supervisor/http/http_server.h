// A reusable HTTP/1.1 server on its own libuv loop thread: `corepool serve`
// puts its Open Inference Protocol endpoints behind it. The server owns its
// loop, listeners and connections; a Handler runs on the loop thread and
// answers through a Responder that may outlive the request, the connection and
// even the server (a late send is then a no-op). Used by `corepool serve`.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "supervisor/http/http_types.h"
#include "supervisor/http/websocket_session.h"

namespace corepool {

// The way back to one request's connection. Copyable; all copies share one
// state. send() may be called from any thread, and takes effect once: later
// calls are ignored (and logged). If the last copy is dropped without a send,
// the client gets a 500 {"error": "handler dropped the request"}, so a buggy
// handler never leaks a connection. If the connection is gone, send is a no-op.
class Responder {
 public:
  struct State;
  explicit Responder(std::shared_ptr<State> state);
  void send(HttpResponse response) const;
  bool sent() const;
  // Runs `fn` once if the client leaves before an answer was sent: its
  // connection closed, or it shut its write side (a request watched this way
  // takes that as leaving, as Go's net/http does; one that is not watched
  // still gets its answer after a half-close). Runs at once (on the calling
  // thread) if the client has left already, else on the loop thread. `fn`
  // must not block; it typically cancels the work and calls abandon().
  void on_close(std::function<void()> fn) const;
  // The request is over without an answer (its client is gone): nothing is
  // sent, and the dropped-Responder 500 is not either.
  void abandon() const;
  // The sender of this request's connection once it is upgraded: answer 101
  // with HttpResponse::upgrade set, and frames sent through this follow it.
  WsSender websocket() const;

 private:
  std::shared_ptr<State> state_;
};

class HttpServer {
 public:
  // Runs on the loop thread: it must not block. Slow work goes elsewhere and
  // answers later through the Responder.
  using Handler = std::function<void(HttpRequest&&, Responder)>;

  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // stop(0ms): in-flight requests are cut off
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens on the calling thread, then starts the loop thread.
  // Throws std::runtime_error with context ("cannot listen on 127.0.0.1:8080:
  // address already in use"); nothing is left open after a throw.
  void start(Handler handler);
  int port() const;  // the bound TCP port; 0 when there is no TCP listener
  // Stop accepting, let in-flight requests finish until `drain` has passed,
  // close everything and join the loop thread. Idempotent. Never call it from
  // the handler (the loop thread would join itself).
  void stop(std::chrono::milliseconds drain);
  HttpStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corepool
