// RFC 6455 framing (supervisor/http/websocket_frame.cc): the handshake key of
// the RFC's own example, server frames byte for byte, and a client's frames
// read whole, split at every byte, fragmented, interleaved with control
// frames, and refused with the close code the RFC names.
#include "supervisor/http/websocket_frame.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corepool::ws {
namespace {

using ::testing::HasSubstr;

// A client frame: masked with `mask`, the shortest length form unless `length_bytes` forces one.
std::string client_frame(std::uint8_t first, std::string_view payload, bool masked = true, int length_bytes = 0) {
  std::string f(1, static_cast<char>(first));
  const std::uint8_t m = masked ? 0x80 : 0;
  const std::size_t n = payload.size();
  if (length_bytes == 0) length_bytes = n < 126 ? 0 : n <= 0xFFFF ? 2 : 8;
  if (length_bytes == 0) {
    f += static_cast<char>(m | n);
  } else {
    f += static_cast<char>(m | (length_bytes == 2 ? 126 : 127));
    for (int k = length_bytes - 1; k >= 0; --k) f += static_cast<char>((static_cast<std::uint64_t>(n) >> (8 * k)) & 0xFF);
  }
  const char mask[4] = {0x37, static_cast<char>(0xfa), 0x21, 0x3d};
  if (masked) f.append(mask, 4);
  for (std::size_t k = 0; k < n; ++k) f += masked ? static_cast<char>(payload[k] ^ mask[k & 3]) : payload[k];
  return f;
}

TEST(WebSocketFrameTest, AcceptKeyIsTheRfcExample) {
  EXPECT_EQ(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");  // RFC 6455 section 1.3
}

TEST(WebSocketFrameTest, ServerFramesAreUnmaskedWithTheShortestLength) {
  EXPECT_EQ(encode_frame(Opcode::kText, "Hello"), std::string("\x81\x05Hello"));  // RFC 6455 section 5.7
  const std::string mid = encode_frame(Opcode::kBinary, std::string(300, 'x'));
  EXPECT_EQ(mid.substr(0, 4), std::string("\x82\x7e\x01\x2c", 4));
  const std::string big = encode_frame(Opcode::kBinary, std::string(70000, 'x'));
  EXPECT_EQ(big.substr(0, 10), std::string("\x82\x7f\x00\x00\x00\x00\x00\x01\x11\x70", 10));
  EXPECT_EQ(encode_close(1000, "bye"), std::string("\x88\x05\x03\xe8" "bye", 7));
  EXPECT_EQ(encode_close(1008, std::string(200, 'r')).size(), 2u + 125u);  // cut to a control frame's size
}

TEST(WebSocketFrameTest, AMaskedTextFrameIsReadWholeOrOneByteAtATime) {
  const std::string frame = client_frame(0x81, "Hello");
  FrameReader whole(1024);
  std::vector<WsEvent> events;
  EXPECT_FALSE(whole.feed(frame, events));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, WsEvent::Kind::kText);
  EXPECT_EQ(events[0].payload, "Hello");
  FrameReader split(1024);
  events.clear();
  for (char c : frame + client_frame(0x82, std::string(300, '\x01'))) EXPECT_FALSE(split.feed(std::string(1, c), events));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].payload, "Hello");
  EXPECT_EQ(events[1].kind, WsEvent::Kind::kBinary);
  EXPECT_EQ(events[1].payload, std::string(300, '\x01'));
}

TEST(WebSocketFrameTest, FragmentsAreJoinedAndControlFramesMayComeBetweenThem) {
  FrameReader reader(1024);
  std::vector<WsEvent> events;
  const std::string bytes = client_frame(0x02, "ab") + client_frame(0x89, "p") + client_frame(0x00, "cd") +
                            client_frame(0x80, "ef") + client_frame(0x88, std::string("\x03\xe8" "done", 6));
  EXPECT_FALSE(reader.feed(bytes, events));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kind, WsEvent::Kind::kPing);
  EXPECT_EQ(events[0].payload, "p");
  EXPECT_EQ(events[1].kind, WsEvent::Kind::kBinary);
  EXPECT_EQ(events[1].payload, "abcdef");
  EXPECT_EQ(events[2].kind, WsEvent::Kind::kClose);
  EXPECT_EQ(events[2].close_code, 1000);
  EXPECT_EQ(events[2].payload, "done");
}

struct Bad {
  std::string bytes;
  std::uint16_t code;
  std::string says;
};

TEST(WebSocketFrameTest, ForbiddenFramesAreRefusedWithTheRfcsCloseCode) {
  const std::vector<Bad> cases = {
      {client_frame(0x82, "pcm", /*masked=*/false), kProtocolError, "not masked"},
      {client_frame(0x83, "x"), kProtocolError, "unknown opcode 3"},
      {client_frame(0x8B, "x"), kProtocolError, "unknown opcode 11"},
      {client_frame(0xC2, "x"), kProtocolError, "reserved bits"},
      {client_frame(0x80, "x"), kProtocolError, "continuation frame with no message open"},
      {client_frame(0x01, "a") + client_frame(0x81, "b"), kProtocolError, "before the fragmented message ended"},
      {client_frame(0x09, "p"), kProtocolError, "control frame fragmented"},
      {client_frame(0x89, std::string(126, 'p')), kProtocolError, "over 125 bytes"},
      {client_frame(0x82, "abc", true, 2), kProtocolError, "shortest form"},
      {client_frame(0x82, std::string(2000, 'x')), kTooBig, "message over 1024 bytes"},
      {client_frame(0x02, std::string(600, 'x')) + client_frame(0x80, std::string(600, 'x')), kTooBig, "over 1024"},
      {client_frame(0x81, "\xff\xfe"), kInvalidPayload, "not valid UTF-8"},
      {client_frame(0x81, "\xc0\xaf"), kInvalidPayload, "not valid UTF-8"},  // overlong '/'
      {client_frame(0x88, "\x03"), kProtocolError, "1-byte payload"},
      {client_frame(0x88, std::string("\x03\xed", 2)), kProtocolError, "invalid close code 1005"},
  };
  for (const Bad& c : cases) {
    FrameReader reader(1024);
    std::vector<WsEvent> events;
    const auto v = reader.feed(c.bytes, events);
    ASSERT_TRUE(v) << c.says;
    EXPECT_EQ(v->code, c.code) << c.says;
    EXPECT_THAT(v->reason, HasSubstr(c.says));
    EXPECT_TRUE(reader.feed(client_frame(0x81, "ok"), events)) << "a violation is final";
  }
}

TEST(WebSocketFrameTest, AHugeDeclaredLengthIsRefusedBeforeAnyPayloadArrives) {
  FrameReader reader(1 << 20);
  std::vector<WsEvent> events;
  std::string header("\x82\xff\x00\x00\x00\x10\x00\x00\x00\x00", 10);  // 64 GiB, masked
  const auto v = reader.feed(header, events);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->code, kTooBig);
}

TEST(WebSocketFrameTest, Utf8ValidationFollowsTheStandard) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("plain {\"end\": true}"));
  EXPECT_TRUE(valid_utf8("\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5"));  // κόσμε
  EXPECT_TRUE(valid_utf8("\xf0\x9f\x8e\xb5"));
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(valid_utf8("\xe2\x82"));          // cut short
  EXPECT_FALSE(valid_utf8("\x80"));
}

}  // namespace
}  // namespace corepool::ws
