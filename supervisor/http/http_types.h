// The values HttpServer and its parts pass around: a request, a response, the
// server's options and limits, and its counters. Plain structs, no behaviour;
// every header of the room includes this one instead of http_server.h, so
// that the server's parts (connection, wire, mailbox, stats) never point back
// at the server that owns them. Callers get it through http_server.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace corepool {

class WsHandler;  // websocket_session.h

struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string target;                          // "/v2/health/live?x=1", as sent
  std::string version;                         // "HTTP/1.1" or "HTTP/1.0"
  std::map<std::string, std::string> headers;  // lower-case names; repeats joined with ", "
  std::string body;                            // de-chunked
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Extra headers. Content-Length (on every answer but 1xx/204), Transfer-Encoding
  // and Connection are the server's own and are dropped here, but a
  // "Connection: close" makes the server close the connection after sending.
  std::vector<std::pair<std::string, std::string>> headers;
  // With status 101: the connection becomes a WebSocket once this answer is
  // written, and `upgrade` gets what the client sends (websocket_session.h).
  std::shared_ptr<WsHandler> upgrade;
  // With status 200 and `upgrade` set: an event stream (Server-Sent Events).
  // The headers go out without a Content-Length, then the body is whatever
  // the handler's WsSender sends (raw()) until it ends it (end()) or the
  // client leaves; what the client sends is ignored; ws_idle_timeout_ms
  // calls on_idle() each time it passes (a keep-alive), never closing.
  bool event_stream = false;
};

struct HttpServerOptions {
  std::string tcp_host = "127.0.0.1";  // IPv4 or IPv6 literal; empty = no TCP listener
  int tcp_port = 8080;                 // 0 = ephemeral, see HttpServer::port()
  std::string unix_path;               // empty = none; created 0660, removed on stop
  std::string unix_group;              // group that owns the socket (chown at bind); empty = ours
  std::vector<int> inherited_fds;      // already-listening sockets (systemd); the server owns them
  std::uint64_t max_body_bytes = 64ull << 20;
  std::uint32_t max_header_bytes = 16u << 10;
  int max_connections = 1024;
  int idle_timeout_ms = 60000;    // keep-alive: between requests
  int header_timeout_ms = 10000;  // a request's headers must arrive within this (slowloris)
  int body_timeout_ms = 60000;    // its body within this, counted from the end of headers
  // Called on the loop thread every tick_ms while the server runs (0 = never):
  // proof that the loop turns, for a watchdog. Must not block.
  int tick_ms = 0;
  std::function<void()> on_tick;
  // WebSocket connections (a route answered 101 with an upgrade handler):
  std::size_t ws_max_message_bytes = 1u << 20;  // a bigger client message closes with 1009
  std::size_t ws_max_backlog_bytes = 1u << 20;  // frames not yet taken by the client; more are dropped
  int ws_idle_timeout_ms = 10000;               // no data message this long: WsHandler::on_idle
};

// Counters since start(). A snapshot, copied under a lock.
struct HttpStats {
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_rejected = 0;  // answered 503: over max_connections
  std::uint64_t connections_open = 0;      // accepted and not yet closed
  std::uint64_t requests = 0;              // complete requests handed to the handler
  std::uint64_t bytes_received = 0;
  std::uint64_t bytes_sent = 0;
  std::map<int, std::uint64_t> responses_by_status;  // everything written, errors included
};

}  // namespace corepool
