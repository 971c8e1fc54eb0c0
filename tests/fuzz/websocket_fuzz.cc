// libFuzzer target: a client's bytes into the WebSocket frame reader
// (supervisor/http/websocket_frame.cc) that serve's stream endpoint uses.
// The first byte picks how the rest is cut into feeds (one call, or pieces of
// 1..16 bytes), so partial headers and payloads are exercised. Invariants:
// never a crash or a hang; a violation carries a close code of RFC 6455 7.4.1
// and a reason; every text message is valid UTF-8; no message exceeds the
// limit; after a violation the reader stays failed.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "supervisor/http/websocket_frame.h"

namespace ws = corepool::ws;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  constexpr size_t kLimit = 4096;
  const size_t piece = data[0] % 17;  // 0: all at once
  std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  ws::FrameReader reader(kLimit);
  std::vector<ws::WsEvent> events;
  bool failed = false;
  while (!bytes.empty()) {
    const size_t n = piece == 0 ? bytes.size() : std::min(piece, bytes.size());
    const auto v = reader.feed(bytes.substr(0, n), events);
    bytes.remove_prefix(n);
    if (failed && !v) std::abort();  // a violation is final
    if (v) {
      failed = true;
      const bool known = v->code == 1002 || v->code == 1007 || v->code == 1009;
      if (!known || v->reason.empty()) std::abort();
    }
  }
  for (const ws::WsEvent& e : events) {
    if (e.kind == ws::WsEvent::Kind::kText && !ws::valid_utf8(e.payload)) std::abort();
    if (e.payload.size() > kLimit) std::abort();
  }
  return 0;
}
