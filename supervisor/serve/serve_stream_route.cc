// GET /v2/models/NAME/audio/stream: everything that can be refused is
// refused here with a plain HTTP answer, before the upgrade (RFC 6455 4.2.2):
// a request that is no WebSocket handshake (400, or 426 for another version),
// an unknown or unloaded model (404 / 503), a bad query (400 naming the
// parameter), serve.max_streams open (503 + Retry-After): StreamRegistry::
// open() decides. What passes gets a WsStreamHandler over its stream as the
// connection's handler and a 101.
#include <boost/algorithm/string/predicate.hpp>
#include <nlohmann/json.hpp>

#include "supervisor/http/websocket_frame.h"
#include "supervisor/serve/serve_routes.h"
#include "supervisor/serve/ws_stream.h"

namespace corepool {
namespace {

const std::string* header(const HttpRequest& request, const char* name) {
  auto it = request.headers.find(name);
  return it == request.headers.end() ? nullptr : &it->second;
}

// "" when the request is a version-13 WebSocket handshake, else why not.
std::string handshake_error(const HttpRequest& request) {
  const std::string* upgrade = header(request, "upgrade");
  const std::string* connection = header(request, "connection");
  if (!upgrade || !boost::algorithm::icontains(*upgrade, "websocket")) {
    return "this endpoint is a WebSocket: send \"Upgrade: websocket\" (RFC 6455)";
  }
  if (!connection || !boost::algorithm::icontains(*connection, "upgrade")) return "\"Connection: Upgrade\" missing";
  const std::string* key = header(request, "sec-websocket-key");
  if (!key || key->size() != 24) return "Sec-WebSocket-Key: missing, or not 16 bytes in base64";
  return "";
}

// {"error": message} with one header that tells the client what would do.
HttpResponse refusal(int status, const std::string& message, const char* name, const char* value) {
  HttpResponse r;
  r.status = status;
  r.body = nlohmann::json{{"error", message}}.dump();
  r.headers.emplace_back(name, value);
  return r;
}

}  // namespace

void ServeRoutes::audio_stream(HttpRequest& request, const Reply& reply, const std::string& path) {
  if (request.method != "GET") return reply.send(refusal(405, "method not allowed; use GET", "Allow", "GET"));
  if (std::string e = handshake_error(request); !e.empty()) return reply.error(400, e);
  if (const std::string* v = header(request, "sec-websocket-version"); !v || *v != "13") {
    return reply.send(refusal(426, "Sec-WebSocket-Version: only 13 (RFC 6455)", "Sec-WebSocket-Version", "13"));
  }
  const std::string model = path.substr(11, path.size() - 11 - 13);  // between /v2/models/ and /audio/stream
  const size_t q = request.target.find('?');
  const std::string_view query = q == std::string::npos ? "" : std::string_view(request.target).substr(q + 1);
  AudioStreams::Opened opened = streams_.open(model, query, std::make_unique<WsStreamOutput>(reply.websocket()));
  switch (opened.status.code) {
    case triton::Code::kOk: break;
    case triton::Code::kInvalidArgument: return reply.error(400, "query: " + opened.status.message);
    case triton::Code::kResourceExhausted: return reply.error(503, opened.status.message, retry_after_s_);
    default: return fail(reply, opened.status);
  }
  HttpResponse r;
  r.status = 101;
  r.content_type.clear();
  r.headers = {{"Upgrade", "websocket"}, {"Sec-WebSocket-Accept", ws::accept_key(*header(request, "sec-websocket-key"))}};
  r.upgrade = std::make_shared<WsStreamHandler>(opened.stream, stream_idle_s_);
  reply.send(std::move(r));  // posted before any frame the stream sends: the 101 goes first
  opened.stream->start();
}

}  // namespace corepool
