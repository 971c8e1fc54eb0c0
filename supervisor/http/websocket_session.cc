// WsSender: frames posted to the server's mailbox, written by the loop thread
// in posting order (after the 101 that opened the connection, which the
// route posted first).
#include "supervisor/http/websocket_session.h"

#include "supervisor/http/http_mailbox.h"
#include "supervisor/http/websocket_frame.h"

namespace corepool {

void WsSender::text(std::string text) const {
  mailbox_->post({connection_id_, 0, {}, http::WsOut{ws::encode_frame(ws::Opcode::kText, text), false}});
}

void WsSender::raw(std::string bytes) const {
  if (bytes.empty()) return;  // an empty close-less WsOut would mean nothing; an empty closing one ends
  mailbox_->post({connection_id_, 0, {}, http::WsOut{std::move(bytes), false}});
}

void WsSender::end() const { mailbox_->post({connection_id_, 0, {}, http::WsOut{{}, true}}); }

void WsSender::close(std::uint16_t code, std::string reason) const {
  mailbox_->post({connection_id_, 0, {}, http::WsOut{ws::encode_close(code, reason), true}});
}

}  // namespace corepool
