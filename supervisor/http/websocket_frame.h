// RFC 6455 framing for the HTTP server's WebSocket endpoints, as plain
// functions over bytes: the handshake's Sec-WebSocket-Accept, the server's
// frames (never masked), and an incremental reader of a client's frames that
// unmasks, reassembles fragmented messages, surfaces control frames between
// fragments, and refuses anything the RFC forbids with the close code and a
// reason to send. No sockets, no libuv: the connection owns the bytes, this
// file only says what they mean, so it is unit-tested and fuzzed alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corepool::ws {

enum class Opcode : std::uint8_t {
  kContinuation = 0x0,
  kText = 0x1,
  kBinary = 0x2,
  kClose = 0x8,
  kPing = 0x9,
  kPong = 0xA,
};

// The close codes this server sends (RFC 6455 section 7.4.1).
enum CloseCode : std::uint16_t {
  kNormal = 1000,
  kGoingAway = 1001,       // the server is shutting down
  kProtocolError = 1002,   // a frame the RFC forbids (unmasked, bad opcode, ...)
  kUnsupportedData = 1003, // binary where text is expected or the reverse
  kInvalidPayload = 1007,  // text that is not UTF-8, PCM that is not whole samples
  kPolicy = 1008,          // a rule of ours: idle too long, a client that does not read
  kTooBig = 1009,          // a message over the limit
  kInternalError = 1011,
};

// base64(SHA-1(key + the RFC's GUID)): the server's proof it read the key.
std::string accept_key(std::string_view sec_websocket_key);

// A server frame: FIN set, unmasked, the shortest length encoding.
std::string encode_frame(Opcode opcode, std::string_view payload);
// A close frame with `code` and `reason` (cut to fit a control frame's 125 bytes).
std::string encode_close(std::uint16_t code, std::string_view reason);

bool valid_utf8(std::string_view text);

// What the reader found: a whole data message, or a control frame.
struct WsEvent {
  enum class Kind { kText, kBinary, kPing, kPong, kClose };
  Kind kind;
  std::string payload;            // the message, ping/pong data, or the close reason
  std::uint16_t close_code = 0;   // kClose: the peer's code; 1005 (none given) when it sent none
};

// Why a client's bytes must end the connection: send a close frame with
// `code` and `reason`, then close.
struct WsViolation {
  std::uint16_t code;
  std::string reason;
};

// Reads a client's frames incrementally. Feed it bytes as they arrive; it
// keeps the partial frame and the fragments of an unfinished message, never
// more than max_message_bytes of payload plus one frame header.
class FrameReader {
 public:
  explicit FrameReader(std::size_t max_message_bytes) : max_message_(max_message_bytes) {}

  // Consumes what it can of `bytes` (a partial frame stays buffered) and
  // appends the events to `out`. A violation is final: later calls return it
  // again without reading.
  std::optional<WsViolation> feed(std::string_view bytes, std::vector<WsEvent>& out);

 private:
  // One frame from the front of buffer_, or nullopt if it is not all here.
  std::optional<WsViolation> next_frame(std::vector<WsEvent>& out, bool& progressed);
  std::optional<WsViolation> on_data(std::uint8_t opcode, bool fin, std::string&& payload, std::vector<WsEvent>& out);
  std::optional<WsViolation> on_control(std::uint8_t opcode, std::string&& payload, std::vector<WsEvent>& out);

  const std::size_t max_message_;
  std::string buffer_;               // bytes of frames not yet whole
  std::string message_;              // fragments of the unfinished data message
  std::optional<std::uint8_t> fragmented_;  // its opcode, while one is open
  std::optional<WsViolation> failed_;
};

}  // namespace corepool::ws
