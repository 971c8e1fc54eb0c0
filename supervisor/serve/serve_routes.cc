// Endpoint table and the infer path. An infer request becomes one
// model-input task per batch item, admitted all together or not at all
// (Executor::try_submit), so a full queue costs the client a 503, never the
// server unbounded memory; the reply is built when the last item is back.
#include "supervisor/serve/serve_routes.h"

#include <unistd.h>

#include <chrono>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "supervisor/serve/inference_protocol.h"

namespace corepool {
namespace {

using json = nlohmann::json;

// Collects the scores of one infer request, on executor threads, unless its
// deadline (on the DeadlineTimer's thread) answers it first: whichever comes
// first answers, under mu_, and closes the stream so the other finds nothing.
class InferState {
 public:
  InferState(std::shared_ptr<Generation> gen, Reply reply, std::string id, size_t batch, DeadlineTimer& deadlines)
      : gen_(std::move(gen)), reply_(std::move(reply)), id_(std::move(id)), scores_(batch), deadlines_(deadlines) {}

  void set_stream(uint64_t id) { stream_ = id; }
  void set_deadline(DeadlineTimer::Id id) {
    std::lock_guard<std::mutex> lock(mu_);
    deadline_ = id;
    if (!gen_) deadlines_.cancel(id);  // answered before the deadline was even set
  }

  void on_result(SegmentResult&& r) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!gen_) return;  // answered 504 already: a late result, dropped
    if (!r.error.empty() && error_.empty()) error_ = "item " + std::to_string(r.index) + ": " + r.error;
    if (r.index < scores_.size()) scores_[r.index] = std::move(r.scores);
    if (++done_ < scores_.size()) return;
    if (error_.empty()) {
      reply_.json(200, oip::infer_response(gen_->model().config, id_, scores_));
    } else {
      reply_.error(500, error_);
    }
    finish();
  }

  // The deadline passed first: 504, and the executor drops what has not started.
  // Returns whether this call answered the request.
  bool expire(int timeout_s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!gen_) return false;
    reply_.error(504, "no answer within serve.request_timeout_s = " + std::to_string(timeout_s) +
                          " s (" + std::to_string(done_) + " of " + std::to_string(scores_.size()) +
                          " items done); the request is cancelled and late results are dropped");
    deadline_ = 0;
    std::shared_ptr<Generation> gen = gen_;
    finish();  // the stream first: thread mode completes cancelled tasks inside cancel()
    gen->executor().cancel(stream_);
    return true;
  }

 private:
  void finish() {
    gen_->close_stream(stream_);
    if (deadline_ != 0) deadlines_.cancel(deadline_);
    gen_.reset();  // the server holds the generation too: never the last reference
  }

  std::mutex mu_;
  std::shared_ptr<Generation> gen_;
  Reply reply_;
  std::string id_;
  std::vector<std::vector<float>> scores_;
  size_t done_ = 0;
  uint64_t stream_ = 0;
  std::string error_;
  DeadlineTimer& deadlines_;
  DeadlineTimer::Id deadline_ = 0;
};

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

std::string endpoint_of(const std::string& path) {
  if (path == "/v2/health/live") return "live";
  if (path == "/v2/health/ready") return "ready";
  if (path == "/v2") return "server_metadata";
  if (path == "/v1/audio:tag") return "audio_tag";
  if (path == "/metrics") return "metrics";
  if (auto m = oip::parse_model_path(path)) {
    if (m->action.empty()) return "model_metadata";
    return m->action == "ready" ? "model_ready" : "infer";
  }
  return "not_found";
}

}  // namespace

ServeRoutes::ServeRoutes(ServeContext& context, ServeMetrics& metrics, AudioTagger& audio, int retry_after_s)
    : context_(context), metrics_(metrics), audio_(audio), retry_after_s_(retry_after_s) {}

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
    return get ? reply.json(200, oip::server_metadata(COREPOOL_VERSION)) : method_not_allowed(reply, "GET");
  }
  std::shared_ptr<Generation> gen = context_.current();
  if (endpoint == "ready") {
    if (!get) return method_not_allowed(reply, "GET");
    const bool ready = gen->executor().stats().all_ready;
    return reply.json(ready ? 200 : 503, ready ? R"({"ready":true})" : R"({"ready":false})");
  }
  if (endpoint == "audio_tag") return request.method == "POST" ? audio_tag(request, reply, gen) : method_not_allowed(reply, "POST");
  const oip::ModelPath model_path = *oip::parse_model_path(path);
  const ModelConfig& model = gen->model().config;
  if (model_path.name != model.name || (!model_path.version.empty() && model_path.version != oip::kModelVersion)) {
    return reply.error(404, "no model \"" + model_path.name + "\"" +
                                (model_path.version.empty() ? "" : " version " + model_path.version) +
                                "; this server serves \"" + model.name + "\" version " + oip::kModelVersion);
  }
  if (endpoint == "model_metadata") return get ? reply.json(200, oip::model_metadata(model)) : method_not_allowed(reply, "GET");
  if (endpoint == "model_ready") {
    if (!get) return method_not_allowed(reply, "GET");
    const bool ready = gen->executor().stats().all_ready;
    return reply.json(ready ? 200 : 503, json{{"name", model.name}, {"ready", ready}}.dump());
  }
  if (request.method != "POST") return method_not_allowed(reply, "POST");
  infer(request, reply, gen);
}

void ServeRoutes::infer(HttpRequest& request, const Reply& reply, const std::shared_ptr<Generation>& gen) {
  const ModelConfig& model = gen->model().config;
  ExecutorStats stats = gen->executor().stats();
  const int64_t max_batch = std::min<int64_t>(model.max_batch, static_cast<int64_t>(stats.depth));
  oip::InferRequest parsed;
  try {
    auto header = request.headers.find("inference-header-content-length");
    if (header == request.headers.end()) {
      parsed = oip::parse_infer_request(request.body, model, max_batch);
    } else {
      size_t json_bytes = 0;
      try {
        json_bytes = std::stoul(header->second);
      } catch (const std::exception&) {
        throw oip::ProtocolError("Inference-Header-Content-Length: not a byte count: " + header->second);
      }
      parsed = oip::parse_binary_infer_request(request.body, json_bytes, model, max_batch);
    }
  } catch (const oip::ProtocolError& e) {
    return reply.error(400, e.what());
  }
  request.body.clear();
  auto state = std::make_shared<InferState>(gen, reply, parsed.id, parsed.items.size(), deadlines_);
  const uint64_t stream = gen->open_stream([state](SegmentResult&& r) { state->on_result(std::move(r)); });
  state->set_stream(stream);
  std::vector<SegmentTask> tasks;
  tasks.reserve(parsed.items.size());
  for (size_t i = 0; i < parsed.items.size(); ++i) {
    tasks.push_back({stream, i, std::move(parsed.items[i]), TaskInput::kModelInput});
  }
  if (!gen->executor().try_submit(tasks)) {
    gen->close_stream(stream);
    reply.error(503, "the inference queue is full (" + std::to_string(stats.depth) + " segments); retry later",
                retry_after_s_);
    return;
  }
  const int timeout_s = gen->config().request_timeout_s;
  if (timeout_s <= 0) return;
  // The timer holds the state (and through it the generation) until the
  // answer cancels it; the counter outlives the routes.
  state->set_deadline(deadlines_.add(DeadlineTimer::Clock::now() + std::chrono::seconds(timeout_s),
                                     [state, timeout_s, counter = timed_out_] {
                                       if (state->expire(timeout_s)) ++*counter;
                                     }));
}

void ServeRoutes::audio_tag(HttpRequest& request, const Reply& reply, std::shared_ptr<Generation> gen) {
  if (request.body.empty()) return reply.error(400, "empty body: send the audio file (WAV, FLAC, OGG) as the body");
  AudioTagger::Job job{std::move(gen), std::make_shared<const std::string>(std::move(request.body)), reply};
  if (!audio_.enqueue(std::move(job))) {
    reply.error(503, "too many audio requests in progress; retry later", retry_after_s_);
  }
}

}  // namespace corepool
