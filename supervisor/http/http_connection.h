// One accepted HTTP/1.1 connection of HttpServer: reads into a buffer, feeds
// Boost.Beast's request parser, hands each complete request to its owner, and
// writes the answer; one request at a time (pipelined bytes wait unparsed).
// Lives on the loop thread only. The owner (HttpServer::Impl) holds it until
// on_closed(), which runs after both of its libuv handles are closed.
#pragma once

#include <uv.h>

#include <boost/beast/http.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "supervisor/http/http_mailbox.h"
#include "supervisor/http/http_types.h"
#include "supervisor/http/http_stats.h"
#include "supervisor/http/websocket_frame.h"
#include "supervisor/http/websocket_session.h"

namespace corepool::http {

class Connection;

class ConnectionOwner {
 public:
  virtual const HttpServerOptions& options() const = 0;
  virtual StatsBoard& stats_board() = 0;
  virtual void on_request(Connection& connection, HttpRequest&& request) = 0;
  virtual void on_closed(Connection& connection) = 0;  // may delete the connection

 protected:
  ~ConnectionOwner() = default;
};

enum class ConnState {
  kIdle,       // between requests: idle timeout (header timeout before the first)
  kHeaders,    // some header bytes in: header timeout
  kBody,       // headers done, body incomplete: body timeout
  kHandling,   // the handler has the request: no timer
  kWriting,    // a final response is being written: idle timeout as send timeout
  kUpgraded,   // a WebSocket after a 101: frames both ways (websocket_session.h), idle timer
  kLingering,  // last response sent, write side shut: drain input, then close
  kClosed,     // uv_close issued; waiting for the close callbacks
};

class Connection {
 public:
  Connection(ConnectionOwner& owner, uv_loop_t* loop, std::uint64_t id, bool is_pipe);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  uv_stream_t* stream() { return &handle_.stream; }
  std::uint64_t id() const { return id_; }
  std::uint64_t request_seq() const { return seq_; }
  bool counted() const { return counted_; }  // accepted and not rejected: an open connection

  void start();                            // after uv_accept: serve
  void reject(int status, std::string_view message);  // after uv_accept: answer once, close
  void deliver(std::uint64_t seq, HttpResponse&& response);  // a Responder's answer
  void deliver_ws(WsOut&& out);            // a WsSender's frame or bytes (ignored unless upgraded)
  void begin_drain();                      // the server stops: finish the current exchange
  // Called (once) if the client leaves while the current request is being
  // handled; returns whether the handler was watching (then the connection
  // closes at once even on a half-close: no answer will come).
  void watch(std::function<bool()> client_gone) { client_gone_ = std::move(client_gone); }
  void close();                            // now; idempotent

 private:
  enum class WriteKind { kInterim, kFinal, kWsClose };
  struct WriteReq;
  using Parser = boost::beast::http::request_parser<boost::beast::http::string_body>;

  void on_read(ssize_t nread, const uv_buf_t* buf);
  void on_eof();
  void pump();
  bool feed_parser();
  void begin_request();
  void on_header_done();
  void on_parse_error(const boost::beast::error_code& ec);
  void dispatch();
  void respond(HttpResponse&& response, bool close_after);
  void send_error(int status, std::string_view message);
  void write(std::string bytes, WriteKind kind);
  static void on_write(uv_write_t* req, int status);
  void on_final_written();
  void linger();
  void arm_timer(int ms);
  void on_timer();
  void update_reading();
  bool tell_client_gone();  // true when the handler was watching
  // WebSocket (http_connection_ws.cc).
  void become_websocket(std::shared_ptr<WsHandler> handler);
  void become_event_stream(std::shared_ptr<WsHandler> handler);
  void pump_websocket();
  void on_ws_event(ws::WsEvent&& event);
  void fail_websocket(std::uint16_t code, const std::string& reason);
  void tell_ws_gone(const std::string& why);

  ConnectionOwner& owner_;
  const std::uint64_t id_;
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } handle_;
  uv_timer_t timer_;
  uv_shutdown_t shutdown_;
  int pending_closes_ = 0;
  ConnState state_ = ConnState::kIdle;
  std::string inbuf_;             // read but not yet parsed
  std::optional<Parser> parser_;  // the request being parsed
  std::function<bool()> client_gone_;  // of the request being handled
  std::uint64_t seq_ = 0;         // of the request in flight
  bool counted_ = false;
  bool reading_ = false;
  bool peer_eof_ = false;     // the client shut its write side
  bool close_after_ = false;  // close once the current response is written
  bool keep_alive_ = true;    // of the current request
  bool http10_ = false;
  bool head_ = false;
  // WebSocket, once upgraded:
  std::shared_ptr<WsHandler> ws_handler_;  // null before the upgrade and after on_gone()
  bool event_stream_ = false;      // upgraded to an event stream (HttpResponse::event_stream), not a WebSocket
  std::optional<ws::FrameReader> ws_reader_;
  bool ws_close_sent_ = false;     // no frame may follow our close frame
  bool ws_idle_told_ = false;      // on_idle() called; the next idle timeout closes
};

}  // namespace corepool::http
