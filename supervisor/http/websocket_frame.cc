// RFC 6455 framing. Each rule the reader enforces cites the section that
// demands it; the close code is the one section 7.4.1 names for it (1002 for
// framing, 1007 for bad UTF-8, 1009 for size).
#include "supervisor/http/websocket_frame.h"

#include <openssl/evp.h>
#include <openssl/sha.h>

namespace corepool::ws {
namespace {

constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";  // RFC 6455 section 1.3
constexpr std::size_t kMaxControlPayload = 125;                             // section 5.5

bool is_control(std::uint8_t opcode) { return opcode & 0x8; }

bool known_opcode(std::uint8_t opcode) { return opcode <= 0x2 || (opcode >= 0x8 && opcode <= 0xA); }

// Section 7.4: codes a peer may send in a close frame.
bool valid_close_code(std::uint16_t code) {
  if (code >= 3000 && code <= 4999) return true;  // registered / private use
  return code >= 1000 && code <= 1014 && code != 1004 && code != 1005 && code != 1006;
}

std::string header(std::uint8_t first, std::size_t length) {
  std::string h(1, static_cast<char>(first));
  if (length < 126) {
    h += static_cast<char>(length);
  } else if (length <= 0xFFFF) {
    h += static_cast<char>(126);
    h += static_cast<char>(length >> 8);
    h += static_cast<char>(length & 0xFF);
  } else {
    h += static_cast<char>(127);
    for (int shift = 56; shift >= 0; shift -= 8) h += static_cast<char>((static_cast<std::uint64_t>(length) >> shift) & 0xFF);
  }
  return h;
}

}  // namespace

std::string accept_key(std::string_view sec_websocket_key) {
  const std::string input = std::string(sec_websocket_key) + std::string(kGuid);
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  unsigned char out[4 * ((SHA_DIGEST_LENGTH + 2) / 3) + 1];
  const int n = EVP_EncodeBlock(out, digest, SHA_DIGEST_LENGTH);
  return std::string(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
}

std::string encode_frame(Opcode opcode, std::string_view payload) {
  std::string frame = header(0x80 | static_cast<std::uint8_t>(opcode), payload.size());
  frame.append(payload);
  return frame;
}

std::string encode_close(std::uint16_t code, std::string_view reason) {
  reason = reason.substr(0, kMaxControlPayload - 2);
  // Never cut a UTF-8 sequence in half: the peer would fail us with 1007.
  while (!reason.empty() && !valid_utf8(reason)) reason.remove_suffix(1);
  std::string payload;
  payload += static_cast<char>(code >> 8);
  payload += static_cast<char>(code & 0xFF);
  payload.append(reason);
  return encode_frame(Opcode::kClose, payload);
}

bool valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t extra = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;  // a sequence cut short
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

std::optional<WsViolation> FrameReader::feed(std::string_view bytes, std::vector<WsEvent>& out) {
  if (failed_) return failed_;
  buffer_.append(bytes);
  for (bool progressed = true; progressed && !buffer_.empty();) {
    progressed = false;
    if (auto v = next_frame(out, progressed)) {
      failed_ = v;
      buffer_.clear();
      return failed_;
    }
  }
  return std::nullopt;
}

std::optional<WsViolation> FrameReader::next_frame(std::vector<WsEvent>& out, bool& progressed) {
  if (buffer_.size() < 2) return std::nullopt;
  const auto b0 = static_cast<std::uint8_t>(buffer_[0]);
  const auto b1 = static_cast<std::uint8_t>(buffer_[1]);
  const bool fin = b0 & 0x80;
  const std::uint8_t opcode = b0 & 0x0F;
  if (b0 & 0x70) return WsViolation{kProtocolError, "reserved bits set without an extension (RFC 6455 5.2)"};
  if (!known_opcode(opcode)) return WsViolation{kProtocolError, "unknown opcode " + std::to_string(opcode)};
  if (!(b1 & 0x80)) return WsViolation{kProtocolError, "client frame not masked (RFC 6455 5.1)"};
  std::uint64_t length = b1 & 0x7F;
  std::size_t at = 2;
  if (length >= 126) {
    const std::size_t n = length == 126 ? 2 : 8;
    if (buffer_.size() < at + n) return std::nullopt;
    length = 0;
    for (std::size_t k = 0; k < n; ++k) length = (length << 8) | static_cast<std::uint8_t>(buffer_[at + k]);
    at += n;
    if ((n == 2 && length < 126) || (n == 8 && length <= 0xFFFF)) {
      return WsViolation{kProtocolError, "frame length not in its shortest form (RFC 6455 5.2)"};
    }
    if (length >> 63) return WsViolation{kProtocolError, "frame length has its top bit set (RFC 6455 5.2)"};
  }
  if (is_control(opcode) && (!fin || length > kMaxControlPayload)) {
    return WsViolation{kProtocolError, "control frame fragmented or over 125 bytes (RFC 6455 5.5)"};
  }
  // Checked before the payload is buffered: a huge length costs nothing.
  if (!is_control(opcode) && message_.size() + length > max_message_) {
    return WsViolation{kTooBig, "message over " + std::to_string(max_message_) + " bytes"};
  }
  if (buffer_.size() < at + 4 + length) return std::nullopt;
  const std::string_view mask(buffer_.data() + at, 4);
  std::string payload = buffer_.substr(at + 4, static_cast<std::size_t>(length));
  for (std::size_t k = 0; k < payload.size(); ++k) payload[k] = static_cast<char>(payload[k] ^ mask[k & 3]);
  buffer_.erase(0, at + 4 + static_cast<std::size_t>(length));
  progressed = true;
  return is_control(opcode) ? on_control(opcode, std::move(payload), out)
                            : on_data(opcode, fin, std::move(payload), out);
}

std::optional<WsViolation> FrameReader::on_data(std::uint8_t opcode, bool fin, std::string&& payload,
                                                std::vector<WsEvent>& out) {
  if (opcode == 0 && !fragmented_) return WsViolation{kProtocolError, "continuation frame with no message open"};
  if (opcode != 0 && fragmented_) {
    return WsViolation{kProtocolError, "new data frame before the fragmented message ended (RFC 6455 5.4)"};
  }
  if (opcode != 0) fragmented_ = opcode;
  message_.append(payload);
  if (!fin) return std::nullopt;
  const bool text = *fragmented_ == 0x1;
  fragmented_.reset();
  std::string message = std::move(message_);
  message_.clear();
  if (text && !valid_utf8(message)) return WsViolation{kInvalidPayload, "text message is not valid UTF-8"};
  out.push_back({text ? WsEvent::Kind::kText : WsEvent::Kind::kBinary, std::move(message)});
  return std::nullopt;
}

std::optional<WsViolation> FrameReader::on_control(std::uint8_t opcode, std::string&& payload,
                                                   std::vector<WsEvent>& out) {
  if (opcode == 0x9) {
    out.push_back({WsEvent::Kind::kPing, std::move(payload)});
  } else if (opcode == 0xA) {
    out.push_back({WsEvent::Kind::kPong, std::move(payload)});
  } else {  // close, section 5.5.1: empty, or a 2-byte code and a UTF-8 reason
    if (payload.size() == 1) return WsViolation{kProtocolError, "close frame with a 1-byte payload"};
    std::uint16_t code = 1005;  // "no status received"
    if (payload.size() >= 2) {
      code = static_cast<std::uint16_t>((static_cast<std::uint8_t>(payload[0]) << 8) | static_cast<std::uint8_t>(payload[1]));
      if (!valid_close_code(code)) return WsViolation{kProtocolError, "invalid close code " + std::to_string(code)};
      payload.erase(0, 2);
      if (!valid_utf8(payload)) return WsViolation{kInvalidPayload, "close reason is not valid UTF-8"};
    }
    out.push_back({WsEvent::Kind::kClose, std::move(payload), code});
  }
  return std::nullopt;
}

}  // namespace corepool::ws
