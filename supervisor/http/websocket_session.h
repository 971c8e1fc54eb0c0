// The application's two sides of a WebSocket connection on HttpServer: a
// WsHandler the connection calls (loop thread, never blocking) with what the
// client sent, and a WsSender any thread uses to send text frames and the
// close frame (through the server's mailbox, like a Responder's answer). A
// route upgrades by answering 101 with HttpResponse::upgrade set to its
// handler; the connection holds the handler until on_gone(), the handler
// holds its sender, which outlives the connection harmlessly (a late send is
// a no-op).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace corepool {
namespace http {
class Mailbox;
}

class WsHandler {
 public:
  virtual ~WsHandler() = default;
  virtual void on_text(std::string&& text) = 0;
  virtual void on_binary(std::string&& data) = 0;
  // The client sent a close frame (`code` 1005 when it gave none); it sends
  // nothing more. The handler finishes and closes through its sender.
  virtual void on_client_close(std::uint16_t code) = 0;
  // No data message for HttpServerOptions::ws_idle_timeout_ms.
  virtual void on_idle() = 0;
  // True once the client has ended its side and the handler still owes it
  // the rest (an audio stream tagging its last audio, then its summary and
  // close frame): the connection's idle timer then waits instead of closing,
  // however long the server takes. A client that stops reading is still
  // bounded by the backlog (on_dropped).
  virtual bool finishing() const { return false; }
  // The server stops: finish soon and close (1001).
  virtual void on_server_stop() = 0;
  // An outgoing frame was dropped: the client does not read and the frames
  // waiting for it passed HttpServerOptions::ws_max_backlog_bytes.
  virtual void on_dropped() = 0;
  // Last call: the connection is closed; `why` says how.
  virtual void on_gone(const std::string& why) = 0;
};

// Copyable; every method may be called from any thread.
class WsSender {
 public:
  WsSender(std::shared_ptr<http::Mailbox> mailbox, std::uint64_t connection_id)
      : mailbox_(std::move(mailbox)), connection_id_(connection_id) {}
  // One text frame (UTF-8). Dropped, and on_dropped() called, when the
  // client's backlog is full; a no-op once the connection is gone.
  void text(std::string text) const;
  // A close frame with `code` and `reason`, then the connection closes; later sends are dropped.
  void close(std::uint16_t code, std::string reason) const;
  // An event stream's (HttpResponse::event_stream): bytes as they are, with
  // the same backlog bound as text(); end() closes once they are written.
  void raw(std::string bytes) const;
  void end() const;

 private:
  std::shared_ptr<http::Mailbox> mailbox_;
  std::uint64_t connection_id_;
};

}  // namespace corepool
