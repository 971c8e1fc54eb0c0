// The WebSocket half of Connection (http_connection.h): after a route's 101,
// bytes in go through ws::FrameReader to the route's WsHandler, frames out
// come from its WsSender through the mailbox. Loop thread only. Bounds: a
// client message over ws_max_message_bytes closes with 1009 (the reader
// refuses it from its header, before buffering it); frames the client does
// not read pile up in libuv's write queue only to ws_max_backlog_bytes, past
// which text frames are dropped and counted by the handler (on_dropped).
#include <spdlog/spdlog.h>

#include "supervisor/http/http_connection.h"

namespace corepool::http {

void Connection::become_websocket(std::shared_ptr<WsHandler> handler) {
  state_ = ConnState::kUpgraded;
  ws_handler_ = std::move(handler);
  ws_reader_.emplace(owner_.options().ws_max_message_bytes);
  arm_timer(owner_.options().ws_idle_timeout_ms);
  update_reading();
  if (!inbuf_.empty()) pump_websocket();  // frames the client sent right behind its request
}

// An event stream: our bytes out, the client's ignored (it only listens).
void Connection::become_event_stream(std::shared_ptr<WsHandler> handler) {
  state_ = ConnState::kUpgraded;
  event_stream_ = true;
  ws_handler_ = std::move(handler);
  inbuf_.clear();
  arm_timer(owner_.options().ws_idle_timeout_ms);
  update_reading();
}

void Connection::pump_websocket() {
  if (event_stream_) return inbuf_.clear();
  std::vector<ws::WsEvent> events;
  const std::string bytes = std::move(inbuf_);
  inbuf_.clear();
  const auto violation = ws_reader_->feed(bytes, events);
  for (ws::WsEvent& e : events) {
    if (state_ != ConnState::kUpgraded) return;  // an earlier event closed us
    on_ws_event(std::move(e));
  }
  if (violation && state_ == ConnState::kUpgraded) fail_websocket(violation->code, violation->reason);
}

void Connection::on_ws_event(ws::WsEvent&& event) {
  using Kind = ws::WsEvent::Kind;
  switch (event.kind) {
    case Kind::kPing:
      if (!ws_close_sent_) write(ws::encode_frame(ws::Opcode::kPong, event.payload), WriteKind::kInterim);
      return;
    case Kind::kPong: return;
    case Kind::kClose:
      if (ws_close_sent_) return close();  // the answer to ours: the handshake is complete
      if (ws_handler_) ws_handler_->on_client_close(event.close_code);
      return;
    case Kind::kText:
    case Kind::kBinary:
      if (ws_close_sent_ || !ws_handler_) return;  // after our close, data is dropped (RFC 6455 5.5.1)
      ws_idle_told_ = false;
      arm_timer(owner_.options().ws_idle_timeout_ms);
      if (event.kind == Kind::kText) ws_handler_->on_text(std::move(event.payload));
      else ws_handler_->on_binary(std::move(event.payload));
      return;
  }
}

// A client that broke the protocol gets the close code and reason, then the
// connection closes once that frame is written.
void Connection::fail_websocket(std::uint16_t code, const std::string& reason) {
  spdlog::debug("websocket connection {}: closing with {}: {}", id_, code, reason);
  tell_ws_gone("closed with " + std::to_string(code) + ": " + reason);
  deliver_ws({ws::encode_close(code, reason), true});
}

void Connection::deliver_ws(WsOut&& out) {
  if (state_ != ConnState::kUpgraded || ws_close_sent_) return;
  if (out.close) {
    ws_close_sent_ = true;
    if (out.frame.empty()) return linger();  // an event stream's end: what is queued goes out first
    return write(std::move(out.frame), WriteKind::kWsClose);
  }
  // A client that stops reading: its frames stay in libuv's queue; bounded here.
  if (uv_stream_get_write_queue_size(stream()) + out.frame.size() > owner_.options().ws_max_backlog_bytes) {
    if (ws_handler_) ws_handler_->on_dropped();
    return;
  }
  write(std::move(out.frame), WriteKind::kInterim);
}

void Connection::tell_ws_gone(const std::string& why) {
  if (!ws_handler_) return;
  auto handler = std::move(ws_handler_);
  ws_handler_ = nullptr;
  handler->on_gone(why);
}

}  // namespace corepool::http
