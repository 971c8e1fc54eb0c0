// GET /v2/models/NAME/audio/stream: everything that can be refused is
// refused here with a plain HTTP answer, before the upgrade (RFC 6455 4.2.2):
// a request that is no WebSocket handshake (400, or 426 for another version),
// an unknown or unloaded model (404 / 503), a bad query (400 naming the
// parameter), serve.max_streams open (503 + Retry-After). What passes gets a
// StreamSession as the connection's handler and a 101.
#include <boost/algorithm/string/predicate.hpp>
#include <nlohmann/json.hpp>

#include "audio/pcm_stream.h"
#include "supervisor/http/websocket_frame.h"
#include "supervisor/serve/serve_routes.h"
#include "supervisor/serve/stream_session.h"

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
  std::shared_ptr<Generation> gen = context_.current();
  if (const triton::Status ready = service_.model_ready(model, ""); !ready.ok()) return fail(reply, ready);
  const size_t q = request.target.find('?');
  const PcmSpecOrError query = parse_pcm_query(q == std::string::npos ? "" : std::string_view(request.target).substr(q + 1));
  if (!query.spec) return reply.error(400, "query: " + query.error);
  if (!streams_.reserve()) {
    return reply.error(503, "too many streams: serve.max_streams are open; retry later", retry_after_s_);
  }
  std::shared_ptr<StreamSession> session;
  try {
    session = std::make_shared<StreamSession>(streams_.next_id(), std::move(gen), *query.spec, reply.websocket(),
                                              streams_, stream_idle_s_);
  } catch (const std::exception& e) {  // soxr refused the rates
    streams_.unreserve();
    return reply.error(400, std::string("query: ") + e.what());
  }
  HttpResponse r;
  r.status = 101;
  r.content_type.clear();
  r.headers = {{"Upgrade", "websocket"}, {"Sec-WebSocket-Accept", ws::accept_key(*header(request, "sec-websocket-key"))}};
  r.upgrade = session;
  streams_.add(session);
  reply.send(std::move(r));  // posted before any frame the session sends: the 101 goes first
  session->start();
}

}  // namespace corepool
