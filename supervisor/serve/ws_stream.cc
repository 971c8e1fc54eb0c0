// WsStreamHandler and WsStreamOutput: see ws_stream.h.
#include "supervisor/serve/ws_stream.h"

#include <nlohmann/json.hpp>

#include "supervisor/http/websocket_frame.h"

namespace corepool {
namespace {

std::uint16_t close_code(StreamEnd how) {
  switch (how) {
    case StreamEnd::kEnd:
    case StreamEnd::kClientClose:
    case StreamEnd::kIdle:
    case StreamEnd::kGone: return ws::kNormal;
    case StreamEnd::kServerStop: return ws::kGoingAway;
    case StreamEnd::kBadMessage: return ws::kUnsupportedData;
    case StreamEnd::kQueueFull: return ws::kPolicy;
    case StreamEnd::kBadAudio: return ws::kInvalidPayload;
    case StreamEnd::kFailed: return ws::kInternalError;
  }
  return ws::kInternalError;
}

}  // namespace

bool WsStreamOutput::event(std::string json) {
  sender_.text(std::move(json));  // a drop is reported later, through on_dropped()
  return true;
}

void WsStreamOutput::close(StreamEnd how, const std::string& reason, std::string summary) {
  if (!summary.empty()) sender_.text("{\"summary\":" + summary + "}");
  sender_.close(close_code(how), reason);
}

void WsStreamHandler::on_text(std::string&& text) {
  const nlohmann::json message = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (message.is_object() && message.size() == 1 && message.contains("end") && message["end"] == true) {
    ended_.store(true);
    return stream_->end(StreamEnd::kEnd, "end of stream");
  }
  stream_->end(StreamEnd::kBadMessage, "text messages: only {\"end\": true}; send audio as binary messages");
}

}  // namespace corepool
