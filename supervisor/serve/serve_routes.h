// The HTTP side of `corepool serve`: a thin adapter that maps each request (on
// the HTTP loop thread) to its triton::Service call and turns the answer into
// an HTTP response (triton::http_status), plus the two endpoints that are
// HTTP's own (/metrics, /v1/audio:tag). Never blocks: an infer or a model
// load is answered later, from whatever thread finishes it.
#pragma once

#include <memory>
#include <string>

#include "supervisor/http/http_server.h"
#include "supervisor/serve/serve_audio.h"
#include "supervisor/serve/stream_registry.h"
#include "supervisor/triton/doors.h"
#include "supervisor/triton/serve_generation.h"
#include "supervisor/triton/serve_metrics.h"
#include "supervisor/serve/serve_reply.h"
#include "supervisor/triton/triton_service.h"

namespace corepool {

// What the routes need from the server around them besides the service.
class ServeContext {
 public:
  virtual std::shared_ptr<Generation> current() = 0;  // the generation new requests go to
  virtual ServeSnapshot snapshot() = 0;               // everything /metrics shows but the request counts
  virtual std::string sources_json() = 0;             // GET /v2/sources: the [[source]]s and their state
  // GET /v2/events: a subscriber's handler over its connection's sender, null when too many are open.
  virtual std::shared_ptr<WsHandler> subscribe_events(WsSender sender) = 0;

 protected:
  ~ServeContext() = default;
};

class ServeRoutes {
 public:
  // `doors` guard repository load/unload and shm (un)registration.
  ServeRoutes(triton::Service& service, ServeContext& context, ServeMetrics& metrics, AudioTagger& audio,
              triton::Doors& doors, StreamRegistry& streams, int retry_after_s, int stream_idle_s);
  void handle(HttpRequest&& request, Responder responder);

 private:
  void model_endpoint(HttpRequest& request, const Reply& reply, const std::string& path);
  void infer(HttpRequest& request, const Reply& reply, const std::string& model, const std::string& version);
  void repository(HttpRequest& request, const Reply& reply, const std::string& path);
  void shared_memory(HttpRequest& request, const Reply& reply, const std::string& path);
  void audio_tag(HttpRequest& request, const Reply& reply);
  void events(const Reply& reply, const std::string& method);  // GET /v2/events (Server-Sent Events)
  // GET /v2/models/NAME/audio/stream: the WebSocket upgrade (serve_stream_route.cc).
  void audio_stream(HttpRequest& request, const Reply& reply, const std::string& path);
  // A Status that is not kOk, as {"error": ...} with its HTTP code.
  void fail(const Reply& reply, const triton::Status& status) const;
  // True when the request may pass; else the 401 (with WWW-Authenticate) or 403 is sent.
  bool through_door(const HttpRequest& request, const Reply& reply);

  triton::Service& service_;
  ServeContext& context_;
  ServeMetrics& metrics_;
  AudioTagger& audio_;
  triton::Doors& doors_;
  StreamRegistry& streams_;
  const int retry_after_s_;
  const int stream_idle_s_;
};

}  // namespace corepool
