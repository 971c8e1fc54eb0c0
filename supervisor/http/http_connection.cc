// HTTP/1.1 connection state machine for HttpServer; see http_connection.h for
// the states. Runs on the loop thread only. Every exit path goes through
// close(), which closes both handles; the owner frees us in on_closed().
#include "supervisor/http/http_connection.h"

#include <array>
#include <cctype>
#include <memory>
#include <utility>

#include <spdlog/spdlog.h>

#include "supervisor/http/http_wire.h"

namespace corepool::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

// While a request is being handled, the next pipelined bytes are buffered but
// not parsed; past this much we stop reading (TCP backpressure on the client).
constexpr std::size_t kBusyBufferCap = 64 * 1024;
// After a final "Connection: close" answer we shut our side and keep reading
// for this long: closing with unread input would send an RST that can destroy
// the answer (a 413 while the client is still uploading) before it is read.
constexpr int kLingerMs = 1000;

Connection* from(uv_handle_t* h) { return static_cast<Connection*>(h->data); }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

HttpRequest to_request(bhttp::request<bhttp::string_body>&& msg) {
  HttpRequest request;
  request.method = std::string(msg.method_string());
  request.target = std::string(msg.target());
  request.version = msg.version() == 10 ? "HTTP/1.0" : "HTTP/1.1";
  for (const auto& field : msg) {
    const auto name = field.name_string();
    std::string value(field.value().data(), field.value().size());
    auto [it, inserted] = request.headers.emplace(lower({name.data(), name.size()}), value);
    if (!inserted) it->second.append(", ").append(value);  // RFC 9110 5.3
  }
  request.body = std::move(msg.body());
  return request;
}

}  // namespace

struct Connection::WriteReq {
  uv_write_t req{};
  Connection* connection;
  WriteKind kind;
  std::string bytes;  // owned until on_write: libuv writes straight from it
};

Connection::Connection(ConnectionOwner& owner, uv_loop_t* loop, std::uint64_t id, bool is_pipe)
    : owner_(owner), id_(id) {
  if (is_pipe) uv_pipe_init(loop, &handle_.pipe, 0);
  else uv_tcp_init(loop, &handle_.tcp);
  uv_timer_init(loop, &timer_);
  handle_.handle.data = this;
  timer_.data = this;
}

void Connection::start() {
  counted_ = true;
  if (handle_.handle.type == UV_TCP) uv_tcp_nodelay(&handle_.tcp, 1);  // answers are one write
  arm_timer(owner_.options().header_timeout_ms);  // the first request must come promptly
  update_reading();
}

void Connection::reject(int status, std::string_view message) {
  auto response = error_response(status, message);
  response.headers.emplace_back("Retry-After", "1");
  respond(std::move(response), true);
}

void Connection::close() {
  if (state_ == ConnState::kClosed) return;
  if (state_ == ConnState::kHandling) tell_client_gone();
  tell_ws_gone("connection closed");
  state_ = ConnState::kClosed;
  pending_closes_ = 2;
  auto closed = [](uv_handle_t* h) {
    Connection* self = from(h);
    if (--self->pending_closes_ == 0) self->owner_.on_closed(*self);
  };
  uv_close(&handle_.handle, closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), closed);
}

void Connection::begin_drain() {
  if (state_ == ConnState::kUpgraded) {
    if (ws_handler_) ws_handler_->on_server_stop();  // it closes with 1001 once flushed; the drain deadline bounds it
    return;
  }
  if (state_ == ConnState::kHandling || state_ == ConnState::kWriting) close_after_ = true;
  else if (state_ != ConnState::kLingering) close();
}

void Connection::update_reading() {
  if (state_ == ConnState::kClosed) {  // uv_close already stopped reading
    reading_ = false;
    return;
  }
  const bool busy = state_ == ConnState::kHandling || state_ == ConnState::kWriting;
  // An upgraded connection reads as long as it is open: its limits are the frame reader's.
  const bool want = !peer_eof_ && !(busy && inbuf_.size() >= kBusyBufferCap);
  if (want == reading_) return;
  reading_ = want;
  if (!want) {
    uv_read_stop(stream());
    return;
  }
  auto alloc = [](uv_handle_t*, size_t, uv_buf_t* buf) {
    // One buffer per loop thread: on_read copies out of it before the next read.
    static thread_local std::array<char, 64 * 1024> scratch;
    *buf = uv_buf_init(scratch.data(), scratch.size());
  };
  auto read = [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
    from(reinterpret_cast<uv_handle_t*>(s))->on_read(n, buf);
  };
  if (int rc = uv_read_start(stream(), alloc, read); rc < 0) close();
}

void Connection::on_read(ssize_t nread, const uv_buf_t* buf) {
  if (nread == 0) return;  // EAGAIN
  if (nread == UV_EOF) return on_eof();
  if (nread < 0) return close();  // reset: the client is gone, and so is any answer
  owner_.stats_board().received(static_cast<std::uint64_t>(nread));
  if (state_ == ConnState::kLingering) return;  // discarded on purpose
  inbuf_.append(buf->base, static_cast<std::size_t>(nread));
  if (state_ == ConnState::kUpgraded) return pump_websocket();
  pump();
  update_reading();
}

bool Connection::tell_client_gone() {
  if (!client_gone_) return false;
  auto gone = std::move(client_gone_);
  client_gone_ = nullptr;
  return gone();
}

// The client shut its write side. An answer in progress is still delivered
// (half-close is legal HTTP) unless the handler watches for the client
// leaving: it is told, and the connection closes. Buffered pipelined requests
// are served, then we close.
void Connection::on_eof() {
  peer_eof_ = true;
  if (state_ == ConnState::kUpgraded) return close();  // a client that hangs up without a close frame
  if (state_ == ConnState::kHandling && tell_client_gone()) return close();
  update_reading();
  if (state_ == ConnState::kLingering) return close();
  if (state_ != ConnState::kHandling && state_ != ConnState::kWriting) pump();
}

// Parse buffered bytes until a request is complete, more input is needed, or an error answered.
void Connection::pump() {
  while (state_ == ConnState::kIdle || state_ == ConnState::kHeaders || state_ == ConnState::kBody) {
    if (inbuf_.empty()) break;
    if (state_ == ConnState::kIdle) begin_request();
    if (!feed_parser()) break;
  }
  const bool reading_request = state_ == ConnState::kIdle || state_ == ConnState::kHeaders ||
                               state_ == ConnState::kBody;
  if (peer_eof_ && reading_request) close();  // nothing more will come
}

void Connection::begin_request() {
  parser_.emplace();
  parser_->header_limit(owner_.options().max_header_bytes);
  parser_->body_limit(owner_.options().max_body_bytes);
  state_ = ConnState::kHeaders;
  arm_timer(owner_.options().header_timeout_ms);
}

// One put(); true when it made progress and parsing should continue.
bool Connection::feed_parser() {
  beast::error_code ec;
  const std::size_t used = parser_->put(boost::asio::const_buffer(inbuf_.data(), inbuf_.size()), ec);
  inbuf_.erase(0, used);
  if (ec && ec != bhttp::error::need_more) {
    on_parse_error(ec);
    return false;
  }
  if (state_ == ConnState::kHeaders && parser_->is_header_done()) on_header_done();
  if (parser_->is_done()) {
    dispatch();
    return false;
  }
  return !ec && used > 0;
}

void Connection::on_header_done() {
  state_ = ConnState::kBody;
  arm_timer(owner_.options().body_timeout_ms);
  const auto& header = parser_->get();
  // Only when no body byte has come yet: a client that did not wait needs no prompt.
  if (!parser_->is_done() && inbuf_.empty() && header.version() == 11 &&
      beast::iequals(header[bhttp::field::expect], "100-continue"))
    write("HTTP/1.1 100 Continue\r\n\r\n", WriteKind::kInterim);
}

void Connection::on_parse_error(const beast::error_code& ec) {
  const auto& opts = owner_.options();
  if (ec == bhttp::error::header_limit)
    send_error(431, "request headers exceed " + std::to_string(opts.max_header_bytes) + " bytes");
  else if (ec == bhttp::error::body_limit)
    send_error(413, "request body exceeds " + std::to_string(opts.max_body_bytes) + " bytes");
  else
    send_error(400, "malformed request: " + ec.message());
}

void Connection::dispatch() {
  auto msg = parser_->release();
  parser_.reset();
  keep_alive_ = msg.keep_alive();
  http10_ = msg.version() == 10;
  head_ = msg.method() == bhttp::verb::head;
  state_ = ConnState::kHandling;
  uv_timer_stop(&timer_);  // the handler's time is not the client's fault
  ++seq_;
  update_reading();
  owner_.on_request(*this, to_request(std::move(msg)));  // answers arrive via deliver()
}

void Connection::deliver(std::uint64_t seq, HttpResponse&& response) {
  if (state_ != ConnState::kHandling || seq != seq_) {  // closed, or not its request
    if (response.upgrade) response.upgrade->on_gone("the connection closed before its answer");
    return;
  }
  if (response.status == 101 && response.upgrade) {
    auto handler = std::move(response.upgrade);
    client_gone_ = nullptr;
    owner_.stats_board().response(101);
    write(serialize_response(response, WireOptions{true, false, false}), WriteKind::kInterim);
    return become_websocket(std::move(handler));
  }
  if (response.status == 200 && response.upgrade && response.event_stream) {
    auto handler = std::move(response.upgrade);
    client_gone_ = nullptr;
    owner_.stats_board().response(200);
    write(serialize_response(response, WireOptions{false, http10_, false, true}), WriteKind::kInterim);
    return become_event_stream(std::move(handler));
  }
  response.upgrade.reset();  // only a 101 (or an event stream) upgrades
  respond(std::move(response), !keep_alive_ || asks_to_close(response));
}

void Connection::send_error(int status, std::string_view message) {
  head_ = false;  // the server's own errors always carry their body
  respond(error_response(status, message), true);
}

void Connection::respond(HttpResponse&& response, bool close_after) {
  client_gone_ = nullptr;  // answered: leaving now costs nobody any work
  close_after_ = close_after_ || close_after;
  owner_.stats_board().response(response.status);
  state_ = ConnState::kWriting;
  arm_timer(owner_.options().idle_timeout_ms);  // a client that never reads is dropped
  write(serialize_response(response, WireOptions{!close_after_, http10_, head_}), WriteKind::kFinal);
}

void Connection::write(std::string bytes, WriteKind kind) {
  auto* req = new WriteReq{{}, this, kind, std::move(bytes)};
  uv_buf_t buf = uv_buf_init(req->bytes.data(), static_cast<unsigned>(req->bytes.size()));
  if (uv_write(&req->req, stream(), &buf, 1, &Connection::on_write) < 0) {
    delete req;
    close();
  }
}

// Runs before the close callbacks even when the write is cancelled by
// uv_close (UV_ECANCELED), so the connection is still alive here.
void Connection::on_write(uv_write_t* raw, int status) {
  std::unique_ptr<WriteReq> req(reinterpret_cast<WriteReq*>(raw));  // req is the first member
  Connection* self = req->connection;
  if (status < 0) return self->close();
  self->owner_.stats_board().sent(req->bytes.size());
  if (req->kind == WriteKind::kFinal && self->state_ == ConnState::kWriting) self->on_final_written();
  if (req->kind == WriteKind::kWsClose && self->state_ == ConnState::kUpgraded) self->linger();
}

void Connection::on_final_written() {
  if (close_after_) return linger();
  state_ = ConnState::kIdle;
  arm_timer(owner_.options().idle_timeout_ms);
  pump();  // a pipelined request may already be buffered
  update_reading();
}

void Connection::linger() {
  state_ = ConnState::kLingering;
  inbuf_.clear();
  if (peer_eof_) return close();  // nothing left to drain
  arm_timer(kLingerMs);
  shutdown_.data = this;
  auto done = [](uv_shutdown_t* req, int status) {
    if (status < 0 && status != UV_ECANCELED) static_cast<Connection*>(req->data)->close();
  };
  if (uv_shutdown(&shutdown_, stream(), done) < 0) return close();
  update_reading();  // a rejected connection was never reading
}

void Connection::arm_timer(int ms) {
  uv_timer_start(&timer_, [](uv_timer_t* t) { from(reinterpret_cast<uv_handle_t*>(t))->on_timer(); },
                 static_cast<std::uint64_t>(ms > 0 ? ms : 0), 0);
}

void Connection::on_timer() {
  switch (state_) {
    case ConnState::kHeaders: return send_error(408, "request headers not received in time");
    case ConnState::kBody: return send_error(408, "request body not received in time");
    case ConnState::kHandling: return;
    case ConnState::kClosed: return;
    case ConnState::kUpgraded:
      if (event_stream_) {  // an event stream is quiet by nature: a keep-alive, never a close
        arm_timer(owner_.options().ws_idle_timeout_ms);
        if (ws_handler_) ws_handler_->on_idle();
        return;
      }
      // The client is done and the server still owes it the rest: wait, however long.
      if (ws_handler_ && !ws_close_sent_ && ws_handler_->finishing()) {
        arm_timer(owner_.options().ws_idle_timeout_ms);
        return;
      }
      if (ws_idle_told_ || !ws_handler_) return close();  // told once, and still nothing: give up
      ws_idle_told_ = true;
      arm_timer(owner_.options().ws_idle_timeout_ms);  // its time to flush and close
      return ws_handler_->on_idle();
    default: return close();  // idle, a stuck write, or the end of lingering
  }
}

}  // namespace corepool::http
