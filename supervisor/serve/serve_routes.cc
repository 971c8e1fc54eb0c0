// Endpoint table: each path shape names one endpoint (the /metrics label),
// and each endpoint is one Service call. Request bodies are parsed here (the
// wire's business); what they mean is the service's.
#include "supervisor/serve/serve_routes.h"

#include <nlohmann/json.hpp>

#include "supervisor/triton/client_shm_protocol.h"
#include "supervisor/triton/inference_protocol.h"

namespace corepool {
namespace {

using json = nlohmann::json;

std::string path_of(const std::string& target) { return target.substr(0, target.find('?')); }

bool is_get(const HttpRequest& r) { return r.method == "GET" || r.method == "HEAD"; }

// Known path, wrong method.
void method_not_allowed(const Reply& reply, const char* allow) {
  HttpResponse r;
  r.status = 405;
  r.body = json{{"error", std::string("method not allowed; use ") + allow}}.dump();
  r.headers.emplace_back("Allow", allow);
  reply.send(std::move(r));
}

const char* shm_action_name(oip::ShmAction action) {
  switch (action) {
    case oip::ShmAction::kStatus: return "status";
    case oip::ShmAction::kRegister: return "register";
    case oip::ShmAction::kUnregister: return "unregister";
  }
  return "status";
}

// The answer of a request whose scores went to the client's region: the
// output names where they are and carries no data (as Triton answers).
std::string shm_infer_response(const triton::InferOutput& out) {
  json o = {{"name", oip::kOutputName},
            {"datatype", "FP32"},
            {"shape", {out.batch, out.labels}},
            {"parameters",
             {{"shared_memory_region", out.output_shm->region},
              {"shared_memory_byte_size", out.output_shm->byte_size}}}};
  if (out.output_shm->offset != 0) o["parameters"]["shared_memory_offset"] = out.output_shm->offset;
  json body = {{"model_name", out.model}, {"model_version", out.version}, {"outputs", json::array({o})}};
  if (!out.id.empty()) body["id"] = out.id;
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool is_stream_path(const std::string& path) {
  static const std::string prefix = "/v2/models/", suffix = "/audio/stream";
  return path.size() > prefix.size() + suffix.size() && path.rfind(prefix, 0) == 0 &&
         path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string endpoint_of(const std::string& path) {
  if (path == "/v2/health/live") return "live";
  if (path == "/v2/health/ready") return "ready";
  if (path == "/v2") return "server_metadata";
  if (path == "/v1/audio:tag") return "audio_tag";
  if (is_stream_path(path)) return "audio_stream";
  if (path == "/metrics") return "metrics";
  if (path == "/v2/sources") return "sources";
  if (path == "/v2/events") return "events";
  if (path == "/v2/models/stats") return "model_stats";
  if (path == "/v2/repository/index") return "repository_index";
  if (auto r = oip::parse_repository_path(path)) return "repository_" + r->action;
  if (path.rfind("/v2/systemsharedmemory/", 0) == 0) {
    try {
      if (auto s = oip::parse_shm_path(path)) return std::string("shm_") + shm_action_name(s->action);
    } catch (const oip::ProtocolError&) {
      return "shm_invalid";  // a region name that does not decode: 400 from shared_memory()
    }
  }
  if (auto m = oip::parse_model_path(path)) {
    if (m->action.empty()) return "model_metadata";
    if (m->action == "infer") return "infer";
    return "model_" + m->action;  // model_ready, model_config, model_stats
  }
  return "not_found";
}

// The body of a POST that may be empty or a JSON object; nullopt (and a 400
// sent) when it is neither.
std::optional<json> object_body(const HttpRequest& request, const Reply& reply) {
  if (request.body.find_first_not_of(" \t\r\n") == std::string::npos) return json::object();
  json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    reply.error(400, "the request body must be a JSON object (or empty)");
    return std::nullopt;
  }
  return body;
}

// Runs after the routes are gone too (a late infer answer at shutdown): no `this`.
void fail_with(const Reply& reply, const triton::Status& status, int retry_after_s) {
  if (status.code == triton::Code::kCancelled) return reply.abandon(triton::http_status(status.code));
  const bool busy = status.code == triton::Code::kResourceExhausted;
  reply.error(triton::http_status(status.code), status.message, busy ? retry_after_s : 0);
}

}  // namespace

ServeRoutes::ServeRoutes(triton::Service& service, ServeContext& context, ServeMetrics& metrics, AudioTagger& audio,
                         triton::Doors& doors, StreamRegistry& streams, int retry_after_s, int stream_idle_s)
    : service_(service),
      context_(context),
      metrics_(metrics),
      audio_(audio),
      doors_(doors),
      streams_(streams),
      retry_after_s_(retry_after_s),
      stream_idle_s_(stream_idle_s) {}

bool ServeRoutes::through_door(const HttpRequest& request, const Reply& reply) {
  std::optional<std::string_view> authorization;
  if (auto it = request.headers.find("authorization"); it != request.headers.end()) authorization = it->second;
  const triton::Status status = doors_.check(authorization);
  if (status.ok()) return true;
  HttpResponse r;
  r.status = triton::http_status(status.code);
  r.body = json{{"error", status.message}}.dump();
  // RFC 6750: a 401 names the scheme it wants.
  if (r.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"corepool\"");
  reply.send(std::move(r));
  return false;
}

void ServeRoutes::fail(const Reply& reply, const triton::Status& status) const {
  fail_with(reply, status, retry_after_s_);
}

void ServeRoutes::handle(HttpRequest&& request, Responder responder) {
  const std::string path = path_of(request.target);
  const std::string endpoint = endpoint_of(path);
  const Reply reply(std::move(responder), endpoint, metrics_);
  const bool get = is_get(request);
  if (endpoint == "not_found") return reply.error(404, "no such endpoint: " + path);
  if (endpoint == "live") return get ? reply.json(200, R"({"live":true})") : method_not_allowed(reply, "GET");
  if (endpoint == "metrics") {
    if (!get) return method_not_allowed(reply, "GET");
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_.render(context_.snapshot());
    return reply.send(std::move(r));
  }
  if (endpoint == "server_metadata") {
    return get ? reply.json(200, service_.server_metadata_json()) : method_not_allowed(reply, "GET");
  }
  if (endpoint == "ready") {
    if (!get) return method_not_allowed(reply, "GET");
    const bool ready = service_.server_ready();
    return reply.json(ready ? 200 : 503, ready ? R"({"ready":true})" : R"({"ready":false})");
  }
  if (endpoint == "audio_stream") return audio_stream(request, reply, path);
  if (endpoint == "events") return events(reply, request.method);
  if (endpoint == "sources") {  // the URLs may hold credentials: behind the doors, as model control
    if (!get) return method_not_allowed(reply, "GET");
    if (!through_door(request, reply)) return;
    return reply.json(200, context_.sources_json());
  }
  if (endpoint == "audio_tag") return request.method == "POST" ? audio_tag(request, reply) : method_not_allowed(reply, "POST");
  if (endpoint == "model_stats" && path == "/v2/models/stats") {
    if (!get) return method_not_allowed(reply, "GET");
    auto stats = service_.statistics_json("", "");
    return stats.status.ok() ? reply.json(200, std::move(stats.value)) : fail(reply, stats.status);
  }
  if (endpoint.rfind("repository_", 0) == 0) return repository(request, reply, path);
  if (endpoint.rfind("shm_", 0) == 0) return shared_memory(request, reply, path);
  model_endpoint(request, reply, path);
}

// Server-Sent Events: the connection stays open, each stream's and source's
// event a message ("event: event" / "event: end", data one JSON line). A
// comment line first, so that a client knows it is subscribed.
void ServeRoutes::events(const Reply& reply, const std::string& method) {
  if (method != "GET") return method_not_allowed(reply, "GET");
  std::shared_ptr<WsHandler> handler = context_.subscribe_events(reply.websocket());
  if (!handler) return reply.error(503, "too many /v2/events subscribers; retry later", retry_after_s_);
  HttpResponse r;
  r.content_type = "text/event-stream";
  r.headers = {{"Cache-Control", "no-cache"}};
  r.body = ": subscribed\n\n";
  r.event_stream = true;
  r.upgrade = std::move(handler);
  reply.send(std::move(r));
}

void ServeRoutes::model_endpoint(HttpRequest& request, const Reply& reply, const std::string& path) {
  const oip::ModelPath m = *oip::parse_model_path(path);
  if (m.action == "infer") {
    return request.method == "POST" ? infer(request, reply, m.name, m.version) : method_not_allowed(reply, "POST");
  }
  if (!is_get(request)) return method_not_allowed(reply, "GET");
  if (m.action == "ready") {
    const triton::Status ready = service_.model_ready(m.name, m.version);
    if (ready.code == triton::Code::kNotFound) return fail(reply, ready);
    json body = {{"name", m.name}, {"ready", ready.ok()}};
    if (!ready.ok()) body["reason"] = ready.message;
    return reply.json(ready.ok() ? 200 : 503, body.dump());
  }
  triton::Result<std::string> answer;
  if (m.action.empty()) answer = service_.model_metadata_json(m.name, m.version);
  if (m.action == "config") answer = service_.model_config_json(m.name, m.version);
  if (m.action == "stats") answer = service_.statistics_json(m.name, m.version);
  if (!answer.status.ok()) return fail(reply, answer.status);
  reply.json(200, std::move(answer.value));
}

void ServeRoutes::infer(HttpRequest& request, const Reply& reply, const std::string& model,
                        const std::string& version) {
  auto view = service_.model_view(model, version);
  if (!view.status.ok()) return fail(reply, view.status);
  triton::InferInput input;
  input.model = model;
  input.version = version;
  input.protocol = "http";
  try {
    auto header = request.headers.find("inference-header-content-length");
    const bool binary = header != request.headers.end();
    size_t json_bytes = request.body.size();
    if (binary) {
      try {
        json_bytes = std::stoul(header->second);
      } catch (const std::exception&) {
        throw oip::ProtocolError("Inference-Header-Content-Length: not a byte count: " + header->second);
      }
      if (json_bytes > request.body.size()) {
        throw oip::ProtocolError("Inference-Header-Content-Length: " + header->second + " is larger than the body (" +
                                 std::to_string(request.body.size()) + " bytes)");
      }
    }
    // Triton's system shared memory: the tensor is in the client's region,
    // read by the service; the body holds the JSON alone.
    oip::InferShm shm = oip::parse_infer_shm(std::string_view(request.body).substr(0, json_bytes));
    if (shm.input_shm) {
      if (json_bytes != request.body.size()) {
        throw oip::ProtocolError("inputs[0].parameters.shared_memory_region: the input is in shared memory, yet " +
                                 std::to_string(request.body.size() - json_bytes) + " bytes of binary data follow");
      }
      input.tensor.id = shm.id;
      input.input_header = shm.input_header;
      input.input_shm = shm.input_shm;
    } else if (!binary) {
      input.tensor = oip::parse_infer_request(request.body, view.value.config, view.value.max_batch);
    } else {
      input.tensor = oip::parse_binary_infer_request(request.body, json_bytes, view.value.config, view.value.max_batch);
    }
    input.output_shm = shm.output_shm;
  } catch (const oip::ProtocolError& e) {
    return reply.error(400, e.what());
  }
  request.body.clear();
  if (input.tensor.timeout_us > 0) {  // Triton's per-request timeout: a deadline of the client's
    input.deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(input.tensor.timeout_us);
  }
  auto call = service_.infer(std::move(input), [reply, retry = retry_after_s_](triton::Status status,
                                                                               triton::InferOutput&& out) {
    if (status.ok() && out.output_shm) return reply.json(200, shm_infer_response(out));
    if (status.ok()) return reply.json(200, oip::infer_response(out.model, out.id, out.scores, out.labels));
    fail_with(reply, status, retry);
  });
  // A client that hangs up frees its queue space at once.
  reply.on_close([call] { call->cancel(); });
}

void ServeRoutes::repository(HttpRequest& request, const Reply& reply, const std::string& path) {
  if (request.method != "POST") return method_not_allowed(reply, "POST");
  // The index only reads; load and unload change what serves, and are checked before the body is read.
  if (path != "/v2/repository/index" && !through_door(request, reply)) return;
  const auto body = object_body(request, reply);
  if (!body) return;
  if (path == "/v2/repository/index") {
    const auto ready = body->find("ready");
    if (ready != body->end() && !ready->is_boolean()) return reply.error(400, "ready: must be true or false");
    return reply.json(200, service_.repository_index_json(ready != body->end() && ready->get<bool>()));
  }
  const oip::RepositoryPath r = *oip::parse_repository_path(path);
  if (r.action == "unload") {
    const triton::Status status = service_.unload(r.model);
    return status.ok() ? reply.json(200, "{}") : fail(reply, status);
  }
  std::string config;
  if (auto params = body->find("parameters"); params != body->end()) {
    if (!params->is_object()) return reply.error(400, "parameters: must be a JSON object");
    for (const auto& [key, value] : params->items()) {
      if (key != "config") {
        return reply.error(400, "parameters." + key + ": not supported; parameters.config (a JSON string of "
                                "[engine] keys) is the only load parameter");
      }
      if (!value.is_string()) return reply.error(400, "parameters.config: must be a string holding a JSON object");
      config = value.get<std::string>();
    }
  }
  service_.load(r.model, config, [reply, retry = retry_after_s_](triton::Status status) {
    if (status.ok()) return reply.json(200, "{}");
    fail_with(reply, status, retry);
  });
}

void ServeRoutes::shared_memory(HttpRequest& request, const Reply& reply, const std::string& path) {
  oip::ShmPath s;
  try {
    s = *oip::parse_shm_path(path);
  } catch (const oip::ProtocolError& e) {
    return reply.error(400, e.what());
  }
  if (s.action == oip::ShmAction::kStatus) {
    if (!is_get(request)) return method_not_allowed(reply, "GET");
    auto status = service_.shm_status_json(s.region);
    return status.status.ok() ? reply.json(200, std::move(status.value)) : fail(reply, status.status);
  }
  if (request.method != "POST") return method_not_allowed(reply, "POST");
  if (!through_door(request, reply)) return;
  if (s.action == oip::ShmAction::kUnregister) {
    const triton::Status status = service_.shm_unregister(s.region);
    return status.ok() ? reply.json(200, "{}") : fail(reply, status);
  }
  oip::ShmRegisterBody body;
  try {
    body = oip::parse_shm_register_body(request.body);
  } catch (const oip::ProtocolError& e) {
    return reply.error(400, e.what());
  }
  const triton::Status status = service_.shm_register(s.region, body.key, body.offset, body.byte_size);
  status.ok() ? reply.json(200, "{}") : fail(reply, status);
}

void ServeRoutes::audio_tag(HttpRequest& request, const Reply& reply) {
  if (request.body.empty()) return reply.error(400, "empty body: send the audio file (WAV, FLAC, OGG) as the body");
  std::shared_ptr<Generation> gen = context_.current();
  // Workers up and yet the model not ready: it is unloaded.
  if (const triton::Status ready = service_.model_ready(gen->model().config.name, "");
      ready.code == triton::Code::kUnavailable && service_.server_ready()) {
    return fail(reply, ready);
  }
  AudioTagger::Job job{std::move(gen), std::make_shared<const std::string>(std::move(request.body)), reply};
  reply.on_close([cancel = job.cancel] { cancel->cancel(); });
  if (!audio_.enqueue(std::move(job))) {
    reply.error(503, "too many audio requests in progress; retry later", retry_after_s_);
  }
}

}  // namespace corepool
