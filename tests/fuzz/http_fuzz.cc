// libFuzzer target: bytes from a client into one HTTP connection of corepool
// serve (supervisor/http/http_connection.cc: Boost.Beast's parser, the connection's
// state machine, limits, pipelining, response writing), behind a handler that
// routes like serve_routes.cc and parses bodies with the real KServe v2 and
// audio validation code. One socketpair per input: the client end writes the
// input and shuts its write side; the server end runs on a libuv loop in this
// thread until the connection closes. Invariants: the connection always
// closes, and whatever it sends back is a sequence of HTTP/1.1 responses.
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "supervisor/http/http_connection.h"
#include "supervisor/http/http_wire.h"
#include "supervisor/triton/inference_protocol.h"
#include "tests/fuzz/fuzz_support.h"
#include "audio/audio_error.h"
#include "audio/audio_validation.h"

namespace {

namespace http = corepool::http;
namespace oip = corepool::oip;

// A waveform model of 4 samples per item, so short inputs reach a good infer.
corepool::ModelConfig tiny_model() {
  corepool::ModelConfig m;
  m.name = "tiny";
  m.input = corepool::InputKind::kWaveform;
  m.sample_rate = 1000;
  m.segment_seconds = 0.004;
  m.hop_seconds = 0.004;
  m.labels = {"a", "b"};
  m.thresholds = {0.5f, 0.5f};
  m.max_batch = 4;
  return m;
}

corepool::HttpResponse infer(const corepool::HttpRequest& request, const corepool::ModelConfig& model) {
  oip::InferRequest parsed;
  auto header = request.headers.find("inference-header-content-length");
  if (header == request.headers.end()) {
    parsed = oip::parse_infer_request(request.body, model, model.max_batch);
  } else {
    size_t json_bytes = 0;
    try {
      json_bytes = std::stoul(header->second);
    } catch (const std::exception&) {
      return http::error_response(400, "Inference-Header-Content-Length: not a byte count");
    }
    parsed = oip::parse_binary_infer_request(request.body, json_bytes, model, model.max_batch);
  }
  std::vector<std::vector<float>> scores(parsed.items.size(), std::vector<float>(model.labels.size(), 0.5f));
  return {200, "application/json", oip::infer_response(model, parsed.id, scores), {}, nullptr};
}

// serve_routes.cc's dispatch, minus the engine: the parsing is the real code.
corepool::HttpResponse route(const corepool::HttpRequest& request, const corepool::ModelConfig& model) {
  const std::string path = request.target.substr(0, request.target.find('?'));
  try {
    if (path == "/v1/audio:tag") {
      const corepool::AudioInfo info = corepool::validate_audio_bytes("request body", request.body);
      return {200, "application/json", "{\"frames\":" + std::to_string(info.frames) + "}", {}, nullptr};
    }
    if (path == "/v2") return {200, "application/json", oip::server_metadata("fuzz"), {}, nullptr};
    const auto model_path = oip::parse_model_path(path);
    if (!model_path || model_path->name != model.name) return http::error_response(404, "no such endpoint");
    if (model_path->action == "infer") return infer(request, model);
    return {200, "application/json", oip::model_metadata(model), {}, nullptr};
  } catch (const oip::ProtocolError& e) {
    return http::error_response(400, e.what());
  } catch (const corepool::AudioError& e) {
    return http::error_response(415, e.what());
  }
}

// HttpServer::Impl's part: answers each request on a later loop turn (a 0 ms
// timer), as the server's mailbox does, never from inside the parser's call.
class Owner : public http::ConnectionOwner {
 public:
  explicit Owner(uv_loop_t* loop) {
    options_.max_body_bytes = 64 * 1024;
    options_.max_header_bytes = 4096;
    // Short timers: a run whose input stops mid-request waits for one.
    options_.idle_timeout_ms = options_.header_timeout_ms = options_.body_timeout_ms = 50;
    uv_timer_init(loop, &answer_timer_);
    answer_timer_.data = this;
  }
  void close() { uv_close(reinterpret_cast<uv_handle_t*>(&answer_timer_), nullptr); }

  const corepool::HttpServerOptions& options() const override { return options_; }
  http::StatsBoard& stats_board() override { return stats_; }
  void on_request(http::Connection& connection, corepool::HttpRequest&& request) override {
    if (pending_) corepool::fuzz::fail("a second request while one is being handled");
    connection_ = &connection;
    seq_ = connection.request_seq();
    pending_ = true;
    answer_ = route(request, model_);
    uv_timer_start(&answer_timer_, [](uv_timer_t* t) { static_cast<Owner*>(t->data)->answer(); }, 0, 0);
  }
  void on_closed(http::Connection&) override { closed = true; }

  bool closed = false;

 private:
  void answer() {
    pending_ = false;
    if (!closed) connection_->deliver(seq_, std::move(answer_));
  }

  corepool::HttpServerOptions options_;
  http::StatsBoard stats_;
  corepool::ModelConfig model_ = tiny_model();
  uv_timer_t answer_timer_{};
  http::Connection* connection_ = nullptr;
  std::uint64_t seq_ = 0;
  bool pending_ = false;
  corepool::HttpResponse answer_;
};

// The client's end: reads whatever the server sends until EOF.
struct ClientReader {
  uv_poll_t poll{};
  int fd = -1;
  std::string received;
};

void on_client_readable(uv_poll_t* handle, int status, int) {
  auto* reader = static_cast<ClientReader*>(handle->data);
  char buf[16384];
  const ssize_t n = status < 0 ? -1 : ::read(reader->fd, buf, sizeof(buf));
  if (n > 0) reader->received.append(buf, static_cast<size_t>(n));
  else if (n == 0 || (errno != EAGAIN && errno != EINTR)) uv_poll_stop(handle);
}

// Every response starts with a status line, and the first starts the stream.
void check_responses(const std::string& bytes) {
  if (!bytes.empty() && bytes.rfind("HTTP/1.", 0) != 0) corepool::fuzz::fail("response is not HTTP: " + bytes.substr(0, 80));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static uv_loop_t* loop = [] {
    auto* l = new uv_loop_t;
    uv_loop_init(l);
    return l;
  }();
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) corepool::fuzz::fail("socketpair");
  Owner owner(loop);
  auto* connection = new http::Connection(owner, loop, 1, true);
  if (uv_pipe_open(reinterpret_cast<uv_pipe_t*>(connection->stream()), fds[0]) != 0) corepool::fuzz::fail("uv_pipe_open");
  connection->start();

  // The input fits the socket buffer (max_len is far below it): one write, then EOF.
  if (size > 0 && ::write(fds[1], data, size) != static_cast<ssize_t>(size)) corepool::fuzz::fail("short write");
  ::shutdown(fds[1], SHUT_WR);
  ClientReader reader;
  reader.fd = fds[1];
  reader.poll.data = &reader;
  uv_poll_init(loop, &reader.poll, fds[1]);
  uv_poll_start(&reader.poll, UV_READABLE, on_client_readable);

  uv_run(loop, UV_RUN_DEFAULT);  // returns once the connection is closed and the client saw EOF
  if (!owner.closed) corepool::fuzz::fail("the loop went idle with the connection still open");
  uv_close(reinterpret_cast<uv_handle_t*>(&reader.poll), nullptr);
  owner.close();
  uv_run(loop, UV_RUN_DEFAULT);
  delete connection;
  ::close(fds[1]);
  check_responses(reader.received);
  return 0;
}
