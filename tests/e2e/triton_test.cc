// Triton's HTTP dialect of `corepool serve`, end to end in both modes: the
// extensions /v2 lists, the model configuration, the statistics (against
// /metrics and against time the test itself measured), the model repository
// (load = a new generation, overrides, unload), bad input, and a client that
// hangs up (its segments dropped, nothing sent). Real binary, real sockets.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "config/model_config.h"
#include "tests/e2e/infer_support.h"
#include "tests/e2e/serve_support.h"
#include "tests/support/http_client.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tools/audio_synth.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::HttpClient;
using testing::HttpReply;
using testing::infer_request;
using testing::input_item;
using testing::ServeProcess;

constexpr const char* kInfer = "/v2/models/default/infer";

// CNN10's contract (1 s segments), for the tests that serve it: its input
// shape is not the default model's.
const ModelConfig& cnn10_config() {
  static const ModelConfig config = load_model_config(std::string(COREPOOL_CNN10_MODEL) + "/model.toml");
  return config;
}

// `n` items back to back (input_item(first), input_item(first + 1), ...).
std::vector<float> items(int first, int n, const ModelConfig& model = testing::default_model_config()) {
  std::vector<float> all;
  for (int i = 0; i < n; ++i) {
    const std::vector<float> one = input_item(first + i, model);
    all.insert(all.end(), one.begin(), one.end());
  }
  return all;
}

double metric(HttpClient& http, const std::string& name) { return testing::metric(http.get("/metrics").body, name); }

json get_json(HttpClient& http, const std::string& path, int expect = 200) {
  const HttpReply r = http.get(path);
  EXPECT_EQ(r.status, expect) << path << ": " << r.error << r.body;
  return json::parse(r.body, nullptr, false);
}

HttpReply infer(HttpClient& http, int item, int batch = 1,
                const ModelConfig& model = testing::default_model_config()) {
  const auto [body, headers] = infer_request("r" + std::to_string(item), items(item, batch, model), batch, model);
  return http.post(kInfer, body, headers);
}

// Joins a request thread on every way out of a test, an ASSERT's early
// return included: a joinable std::thread destroyed calls std::terminate,
// and the server the test started would be left running.
struct JoinOnExit {
  std::thread& thread;
  ~JoinOnExit() {
    if (thread.joinable()) thread.join();
  }
};

uint64_t wall_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

class TritonModeTest : public ::testing::TestWithParam<std::string> {
 protected:
  // `engine` / `serve`: lines of the [engine] / [serve] tables.
  std::string config(const std::string& engine, const std::string& serve = "") const {
    const std::string path = dir_.path() + "/corepool.toml";
    std::ofstream(path) << "[engine]\nmode = \"" << GetParam() << "\"\n" << engine << "\n[serve]\n" << serve << "\n";
    return path;
  }
  std::unique_ptr<ServeProcess> start(const std::string& engine, const std::string& serve = "",
                                      const std::vector<std::string>& args = {}) {
    auto server = std::make_unique<ServeProcess>(dir_, args, std::vector<std::string>{},
                                                 std::vector<std::string>{"--config", config(engine, serve)});
    EXPECT_TRUE(server->started()) << server->log();
    return server;
  }
  bool process_mode() const { return GetParam() == "process"; }
  testing::TempDir dir_;
};

TEST_P(TritonModeTest, ServerMetadataListsExactlyTheExtensionsThatWork) {
  auto server = start("workers = 1");
  HttpClient http(server->port());
  const json meta = get_json(http, "/v2");
  EXPECT_EQ(meta["extensions"], json({"binary_tensor_data", "model_configuration", "statistics", "model_repository"}));
  // Client shared memory is off, as Triton ships it, and says how to turn it on.
  const HttpReply shm = http.get("/v2/systemsharedmemory/status");
  EXPECT_EQ(shm.status, 403);
  EXPECT_THAT(shm.body, HasSubstr("serve.allow_client_shm = true"));
  EXPECT_EQ(server->stop().exit_code, 0);

  auto allowed = start("workers = 1", "allow_client_shm = true");
  HttpClient http2(allowed->port());
  EXPECT_EQ(get_json(http2, "/v2")["extensions"].back(), "system_shared_memory");
  EXPECT_EQ(allowed->stop().exit_code, 0);
}

TEST_P(TritonModeTest, ModelConfigurationDescribesTheModelFieldByField) {
  const ModelConfig model = load_model_config(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml");
  auto server = start("workers = 2\nmax_batch = 4\nmax_batch_delay_us = " + std::string(process_mode() ? "700" : "0"));
  HttpClient http(server->port());
  const json c = get_json(http, "/v2/models/default/config");
  EXPECT_EQ(c["name"], "default");
  EXPECT_EQ(c["platform"], "pytorch_libtorch");
  EXPECT_EQ(c["backend"], "pytorch");
  // A request may carry up to model.max_batch items, and never more than the queue holds (4 * 2 * 4).
  EXPECT_EQ(c["max_batch_size"], std::min(model.max_batch, 32));
  ASSERT_EQ(c["input"].size(), 1u);
  EXPECT_EQ(c["input"][0]["name"], "input");
  EXPECT_EQ(c["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(c["input"][0]["dims"], json(model.item_shape()));  // no batch dimension
  ASSERT_EQ(c["output"].size(), 1u);
  EXPECT_EQ(c["output"][0]["name"], "scores");
  EXPECT_EQ(c["output"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(c["output"][0]["dims"], json({model.labels.size()}));
  ASSERT_EQ(c["instance_group"].size(), 1u);
  EXPECT_EQ(c["instance_group"][0]["kind"], "KIND_CPU");
  EXPECT_EQ(c["instance_group"][0]["count"], 2);
  EXPECT_EQ(c["dynamic_batching"]["max_queue_delay_microseconds"], process_mode() ? 700 : 0);
  EXPECT_EQ(c["dynamic_batching"]["preferred_batch_size"], json({4}));
  EXPECT_EQ(c["parameters"]["mode"]["string_value"], GetParam());
  EXPECT_EQ(c["parameters"]["optimize"]["string_value"], "onednn");
  EXPECT_EQ(json::parse(c["parameters"]["labels"]["string_value"].get<std::string>()), json(model.labels));
  // The same through a version path; an unknown model or version is 404.
  EXPECT_EQ(get_json(http, "/v2/models/default/versions/1/config"), c);
  EXPECT_THAT(http.get("/v2/models/nope/config").body, HasSubstr("no model \\\"nope\\\""));
  EXPECT_EQ(http.get("/v2/models/nope/config").status, 404);
  EXPECT_EQ(http.get("/v2/models/default/versions/7/config").status, 404);
  EXPECT_EQ(http.post("/v2/models/default/config", "").status, 405);
  EXPECT_EQ(server->stop().exit_code, 0);
}

// Statistics against /metrics: two views of the same requests must agree.
TEST_P(TritonModeTest, StatisticsCountEveryRequestAndAgreeWithMetrics) {
  auto server = start("workers = 2\nmax_batch = 4");
  HttpClient http(server->port());
  const uint64_t before_ms = wall_ms();
  constexpr int kRequests = 12;
  int items_sent = 0;
  for (int i = 0; i < kRequests; ++i) {
    const int batch = 1 + i % 3;
    ASSERT_EQ(infer(http, i, batch).status, 200);
    items_sent += batch;
  }
  const auto [bad_body, bad_headers] = infer_request("bad", items(0, 1), 1);
  EXPECT_EQ(http.post(kInfer, bad_body.substr(0, bad_body.size() - 4), bad_headers).status, 400);  // never admitted
  const uint64_t after_ms = wall_ms();
  const json all = get_json(http, "/v2/models/stats");
  const json one = get_json(http, "/v2/models/default/versions/1/stats");
  ASSERT_EQ(all["model_stats"].size(), 1u);
  const json& s = one["model_stats"][0];
  EXPECT_EQ(s["name"], "default");
  EXPECT_EQ(s["version"], "1");
  const json& is = s["inference_stats"];
  EXPECT_EQ(is["success"]["count"], kRequests);
  EXPECT_EQ(is["fail"]["count"], 0);
  EXPECT_EQ(s["inference_count"], items_sent);
  for (const char* phase : {"success", "queue", "compute_input", "compute_infer", "compute_output"}) {
    EXPECT_EQ(is[phase]["count"], kRequests) << phase;
    EXPECT_GT(is[phase]["ns"].get<uint64_t>(), 0u) << phase;
  }
  // Each phase of a request lies within its whole time.
  EXPECT_LT(is["queue"]["ns"].get<uint64_t>(), is["success"]["ns"].get<uint64_t>());
  EXPECT_LT(is["compute_infer"]["ns"].get<uint64_t>(), is["success"]["ns"].get<uint64_t>());
  EXPECT_GE(s["last_inference"].get<uint64_t>(), before_ms);
  EXPECT_LE(s["last_inference"].get<uint64_t>(), after_ms);
  // Executions and batches: what the engines counted, batch by batch.
  const std::string m = http.get("/metrics").body;
  EXPECT_EQ(s["execution_count"], testing::metric(m, "corepool_batches_total"));
  uint64_t executions = 0, segments = 0;
  for (const json& b : s["batch_stats"]) {
    const uint64_t size = b["batch_size"], count = b["compute_infer"]["count"];
    EXPECT_GE(size, 1u);
    EXPECT_LE(size, 4u);  // engine.max_batch
    EXPECT_EQ(b["compute_input"]["count"], count);
    EXPECT_GT(b["compute_infer"]["ns"].get<uint64_t>(), 0u);
    executions += count;
    segments += size * count;
  }
  EXPECT_EQ(executions, s["execution_count"].get<uint64_t>());
  EXPECT_EQ(segments, testing::metric(m, "corepool_segments_total"));
  EXPECT_EQ(segments, static_cast<uint64_t>(items_sent));
  // The same requests as /metrics counts them.
  EXPECT_EQ(is["success"]["count"],
            testing::metric(m, R"(corepool_requests_total{endpoint="infer",code="200",protocol="http"})"));
  EXPECT_EQ(http.get("/v2/models/nope/stats").status, 404);
  EXPECT_EQ(server->stop().exit_code, 0);
}

TEST_P(TritonModeTest, RepositoryLoadIsANewGenerationWithItsOverridesAndUnloadStopsTheModel) {
  auto server = start("workers = 1\nmax_batch = 4", "allow_model_control = true");
  HttpClient http(server->port());
  EXPECT_EQ(metric(http, "corepool_generation"), 1);
  const json index = json::parse(http.post("/v2/repository/index", "").body);
  EXPECT_EQ(index, json::parse(R"([{"name":"default","version":"1","state":"READY","reason":""}])"));

  // Load with an override: a new generation that runs engine.max_batch = 2.
  const HttpReply load = http.post("/v2/repository/models/default/load",
                                   R"({"parameters": {"config": "{\"max_batch\": 2}"}})");
  EXPECT_EQ(load.status, 200) << load.body;
  EXPECT_EQ(metric(http, "corepool_generation"), 2);
  EXPECT_EQ(metric(http, R"(corepool_engine_max_batch{source="configured",optimize="onednn"})"), 2);
  EXPECT_EQ(get_json(http, "/v2/models/default/config")["dynamic_batching"]["preferred_batch_size"], json({2}));
  EXPECT_THAT(server->log(), HasSubstr("repository load: reloading config and model"));

  // Unload: not ready, infer 503 with the reason, the index says so.
  EXPECT_EQ(http.post("/v2/repository/models/default/unload", "").status, 200);
  const HttpReply ready = http.get("/v2/models/default/ready");
  EXPECT_EQ(ready.status, 503);
  const HttpReply refused = infer(http, 1);
  EXPECT_EQ(refused.status, 503);
  EXPECT_THAT(refused.body, HasSubstr("unloaded"));
  EXPECT_EQ(json::parse(http.post("/v2/repository/index", "").body)[0]["state"], "UNAVAILABLE");
  EXPECT_EQ(json::parse(http.post("/v2/repository/index", R"({"ready": true})").body), json::array());

  // Load without an override: from disk again, the configured max_batch back.
  EXPECT_EQ(http.post("/v2/repository/models/default/load", "").status, 200);
  EXPECT_EQ(metric(http, "corepool_generation"), 3);
  EXPECT_EQ(metric(http, R"(corepool_engine_max_batch{source="configured",optimize="onednn"})"), 4);
  EXPECT_EQ(http.get("/v2/models/default/ready").status, 200);
  EXPECT_EQ(infer(http, 2).status, 200);

  // SIGHUP is the same path: it loads an unloaded model too.
  EXPECT_EQ(http.post("/v2/repository/models/default/unload", "").status, 200);
  EXPECT_EQ(http.get("/v2/models/default/ready").status, 503);
  server->signal(SIGHUP);
  EXPECT_TRUE(testing::wait_until([&] { return metric(http, "corepool_generation") == 4; }, std::chrono::seconds(60)))
      << server->log();
  EXPECT_EQ(http.get("/v2/models/default/ready").status, 200);
  EXPECT_EQ(infer(http, 2).status, 200);
  EXPECT_EQ(server->stop().exit_code, 0);
}

TEST_P(TritonModeTest, BadRepositoryRequestsGetAClearErrorAndChangeNothing) {
  auto server = start("workers = 1", "allow_model_control = true");
  HttpClient http(server->port());
  struct Case {
    std::string path, body;
    int status;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"/v2/repository/models/nope/load", "", 404, "no model \"nope\""},
      {"/v2/repository/models/nope/unload", "", 404, "no model \"nope\""},
      {"/v2/repository/models/default/load", "{not json", 400, "JSON object"},
      {"/v2/repository/models/default/load", R"({"parameters": {"config": "{\"bogus\": 1}"}})", 400,
       "engine.bogus: unknown key"},
      {"/v2/repository/models/default/load",
       R"({"parameters": {"config": "{\"mode\": \")" + std::string(process_mode() ? "thread" : "process") +
           R"(\"}"}})",
       400, "engine.mode: cannot change on reload"},
      {"/v2/repository/models/default/load", R"({"parameters": {"config": "{\"max_batch\": -3}"}})", 400,
       "engine.max_batch"},
      {"/v2/repository/models/default/load", R"({"parameters": {"config": "[1]"}})", 400, "parameters.config"},
      {"/v2/repository/models/default/load", R"({"parameters": {"config": 5}})", 400, "must be a string"},
      {"/v2/repository/models/default/load", R"({"parameters": {"file:model.pt": "x"}})", 400, "not supported"},
      {"/v2/repository/index", R"({"ready": "yes"})", 400, "ready: must be true or false"},
  };
  for (const Case& c : cases) {
    const HttpReply r = http.post(c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.path << " " << c.body << ": " << r.body;
    const json error = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(error.is_object() && error.contains("error")) << r.body;
    EXPECT_THAT(error["error"].get<std::string>(), HasSubstr(c.says)) << c.body;
  }
  EXPECT_EQ(http.get("/v2/repository/index").status, 405);
  EXPECT_EQ(metric(http, "corepool_generation"), 1);
  EXPECT_EQ(metric(http, "corepool_reloads_failed_total"), 0);  // refused before any reload began
  EXPECT_EQ(infer(http, 3).status, 200);
  EXPECT_EQ(server->stop().exit_code, 0);
}

// Queue time is measured where requests wait, checked against the test's
// own clock. Process mode: the one worker is SIGSTOPped for 300 ms while a
// request waits in its ring. Thread mode: the last of 48 items run one per
// forward() on one engine thread waits behind the other 47, most of the
// request's time: CNN10's forward(), which outweighs the request's own
// handling (the small tagger's does not).
TEST_P(TritonModeTest, QueueTimeGrowsByTheTimeARequestWasHeldBack) {
  const std::vector<std::string> cnn10 = {"--model", COREPOOL_CNN10_MODEL};
  auto server = start("workers = 1\nmax_batch = 1\nqueue_depth = 128\nhang_timeout_ms = 600000", "",
                      process_mode() ? std::vector<std::string>{} : cnn10);
  const ModelConfig& model = process_mode() ? testing::default_model_config() : cnn10_config();
  HttpClient http(server->port());
  ASSERT_EQ(infer(http, 0, 1, model).status, 200);
  auto queue_ns = [&] {
    return get_json(http, "/v2/models/default/stats")["model_stats"][0]["inference_stats"]["queue"]["ns"]
        .get<uint64_t>();
  };
  const uint64_t before = queue_ns();
  const std::vector<int> workers = testing::child_pids(server->pid());
  const int batch = process_mode() ? 1 : 48;
  HttpReply held;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread client([&] {
    HttpClient other(server->port());
    held = infer(other, 5, batch, model);
  });
  JoinOnExit join_client{client};
  if (process_mode()) {
    ASSERT_EQ(workers.size(), 1u);
    ::kill(workers[0], SIGSTOP);
    ASSERT_TRUE(testing::wait_until([&] { return metric(http, "corepool_queue_depth") == 1; },
                                    std::chrono::seconds(10)));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the stall under test, not a synchronization
    ::kill(workers[0], SIGCONT);
  }
  client.join();
  const auto wall_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  ASSERT_EQ(held.status, 200) << held.body;
  const uint64_t waited = queue_ns() - before;
  EXPECT_LE(waited, wall_ns);  // never more than the client waited in all
  if (process_mode()) {
    EXPECT_GE(waited, 300000000u);  // at least the 300 ms the worker was stopped
  } else {
    EXPECT_GE(waited, wall_ns / 2);  // 47 of 48 forward() calls ahead of the last item
  }
  std::printf("[ triton   ] %s mode: queue time %.1f ms of a %.1f ms request\n", GetParam().c_str(), waited / 1e6,
              wall_ns / 1e6);
  EXPECT_EQ(server->stop().exit_code, 0);
}

INSTANTIATE_TEST_SUITE_P(BothModes, TritonModeTest, ::testing::Values("thread", "process"),
                         [](const auto& info) { return info.param; });

// A client that hangs up while its request waits: the queued segments are
// dropped at once (not run), the request is counted, nothing is sent. The
// client shuts only its write side, so that it can see that no byte comes back.
TEST(TritonCancelTest, AClientThatHangsUpHasItsQueuedSegmentsDroppedAndGetsNothing) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/corepool.toml";
  std::ofstream(path) << "[engine]\nmode = \"process\"\nworkers = 1\nqueue_depth = 128\nhang_timeout_ms = 600000\n";
  ServeProcess server(dir, {}, {}, {"--config", path});
  ASSERT_TRUE(server.started()) << server.log();
  const std::vector<int> workers = testing::child_pids(server.pid());
  ASSERT_EQ(workers.size(), 1u);
  ::kill(workers[0], SIGSTOP);
  HttpClient http(server.port());
  // 3 x 32 items: 64 fill the stopped worker's ring, 32 wait in the queue.
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<HttpClient>(server.port(), 10));
    const auto [body, headers] = infer_request("gone" + std::to_string(i), items(32 * i, 32), 32);
    ASSERT_TRUE(clients.back()->send("POST " + std::string(kInfer) + " HTTP/1.1\r\nHost: t\r\n" + headers +
                                     "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
    ASSERT_TRUE(testing::wait_until([&] { return metric(http, "corepool_queue_depth") == 32 * (i + 1); },
                                    std::chrono::seconds(10)));
  }
  for (auto& c : clients) c->shutdown_write();
  EXPECT_TRUE(testing::wait_until([&] { return metric(http, "corepool_requests_cancelled_total") == 3; },
                                  std::chrono::seconds(10)));
  // Dropped at once, with the worker still stopped: only the ring's 64 remain.
  EXPECT_EQ(metric(http, "corepool_segments_cancelled_total"), 32);
  EXPECT_EQ(metric(http, "corepool_queue_depth"), 64);
  EXPECT_EQ(metric(http, R"(corepool_requests_total{endpoint="infer",code="499",protocol="http"})"), 3);
  for (auto& c : clients) {
    EXPECT_FALSE(c->read_reply()) << "an answer was sent to a client that left";
    EXPECT_TRUE(c->closed_by_server());
  }
  ::kill(workers[0], SIGCONT);
  // What the worker held runs and is dropped; the server carries on.
  EXPECT_TRUE(testing::wait_until([&] {
    return metric(http, "corepool_results_dropped_total") == 32 + 64 && metric(http, "corepool_queue_depth") == 0;
  }, std::chrono::seconds(60))) << http.get("/metrics").body;
  EXPECT_EQ(infer(http, 1).status, 200);
  const json stats = get_json(http, "/v2/models/default/stats")["model_stats"][0]["inference_stats"];
  EXPECT_EQ(stats["fail"]["count"], 3);
  EXPECT_EQ(stats["success"]["count"], 1);
  EXPECT_EQ(server.stop().exit_code, 0);
}

// Triton's per-request timeout (parameters.timeout, microseconds) is a client
// deadline: it may shorten serve.request_timeout_s, never lengthen it.
TEST(TritonDeadlineTest, AClientTimeoutShortensTheServersAndNeverLengthensIt) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/corepool.toml";
  std::ofstream(path) << "[engine]\nmode = \"process\"\nworkers = 1\nhang_timeout_ms = 600000\n"
                      << "[serve]\nrequest_timeout_s = 4\n";
  ServeProcess server(dir, {}, {}, {"--config", path});
  ASSERT_TRUE(server.started()) << server.log();
  const std::vector<int> workers = testing::child_pids(server.pid());
  ASSERT_EQ(workers.size(), 1u);
  ::kill(workers[0], SIGSTOP);
  HttpClient http(server.port());
  const std::string item = json(input_item(0)).dump();
  auto body = [&](uint64_t timeout_us) {
    return R"({"parameters": {"timeout": )" + std::to_string(timeout_us) +
           R"(}, "inputs": [{"name": "input", "datatype": "FP32", "shape": )" + testing::input_shape(1).dump() +
           R"(, "data": )" + item + "}]}";
  };
  auto t0 = std::chrono::steady_clock::now();
  const HttpReply shorter = http.post(kInfer, body(300000));
  const double shorter_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(shorter.status, 504) << shorter.body;
  EXPECT_THAT(shorter.body, HasSubstr("the client's deadline"));
  EXPECT_GE(shorter_s, 0.3);
  // Before the server's 4 s: the message above says whose deadline it was;
  // this bound only has to hold on a loaded machine too.
  EXPECT_LT(shorter_s, 3.9);
  t0 = std::chrono::steady_clock::now();
  const HttpReply longer = http.post(kInfer, body(30000000));
  const double longer_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(longer.status, 504) << longer.body;
  EXPECT_THAT(longer.body, HasSubstr("serve.request_timeout_s = 4 s"));
  EXPECT_LT(longer_s, 20);  // the server's 4 s, not the client's 30
  EXPECT_EQ(metric(http, "corepool_requests_timed_out_total"), 2);
  ::kill(workers[0], SIGCONT);
  EXPECT_EQ(infer(http, 1).status, 200);
  EXPECT_EQ(server.stop().exit_code, 0);
}

// Thread mode: the request behind a long one is cancelled while queued. The
// long one is 48 of CNN10's forward() calls, one at a time: the 8 items behind
// them are queued, and dropped, long before the engine thread reaches them.
TEST(TritonCancelTest, InThreadModeAQueuedRequestIsDroppedWhenItsClientCloses) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/corepool.toml";
  std::ofstream(path) << "[engine]\nmode = \"thread\"\nworkers = 1\nmax_batch = 1\nqueue_depth = 128\n";
  ServeProcess server(dir, {"--model", COREPOOL_CNN10_MODEL}, {}, {"--config", path});
  ASSERT_TRUE(server.started()) << server.log();
  HttpClient http(server.port());
  // Items taken in so far, whatever the engine thread has run of them: a
  // request's items enter the queue together, and leave it into the run count.
  auto accepted = [&] {
    const std::string m = http.get("/metrics").body;
    return testing::metric(m, "corepool_queue_depth") + testing::metric(m, "corepool_segments_total");
  };
  HttpReply blocked;
  std::thread blocker([&] {
    HttpClient other(server.port());
    blocked = infer(other, 0, 48, cnn10_config());
  });
  JoinOnExit join_blocker{blocker};
  ASSERT_TRUE(testing::wait_until([&] { return accepted() >= 48; }, std::chrono::seconds(30)));
  {
    HttpClient gone(server.port(), 10);
    const auto [body, headers] = infer_request("gone", items(100, 8, cnn10_config()), 8, cnn10_config());
    ASSERT_TRUE(gone.send("POST " + std::string(kInfer) + " HTTP/1.1\r\nHost: t\r\n" + headers +
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
    ASSERT_TRUE(testing::wait_until([&] { return accepted() >= 56; }, std::chrono::seconds(30)));
  }  // closed
  EXPECT_TRUE(testing::wait_until([&] { return metric(http, "corepool_requests_cancelled_total") == 1; },
                                  std::chrono::seconds(10)));
  blocker.join();
  EXPECT_EQ(blocked.status, 200);
  // Behind 48 forward() calls, the 8 had not started: all dropped unrun.
  EXPECT_EQ(metric(http, "corepool_segments_cancelled_total"), 8);
  EXPECT_EQ(metric(http, "corepool_segments_total"), 48);
  EXPECT_EQ(server.stop().exit_code, 0);
}

// /v1/audio:tag: a long file's segments queue behind a stopped worker; the
// client leaves; decoding stops and the queued segments are dropped.
TEST(TritonCancelTest, AnAudioRequestWhoseClientLeavesIsCancelled) {
  testing::TempDir dir;
  const std::string wav = dir.path() + "/long.wav";
  synth::write_audio(wav, synth::demo_of_seconds(120));
  const std::string path = dir.path() + "/corepool.toml";
  std::ofstream(path) << "[engine]\nmode = \"process\"\nworkers = 1\nqueue_depth = 128\nhang_timeout_ms = 600000\n";
  ServeProcess server(dir, {}, {}, {"--config", path});
  ASSERT_TRUE(server.started()) << server.log();
  const std::vector<int> workers = testing::child_pids(server.pid());
  ASSERT_EQ(workers.size(), 1u);
  ::kill(workers[0], SIGSTOP);
  HttpClient http(server.port());
  {
    HttpClient gone(server.port(), 10);
    const std::string body = testing::read_file(wav);
    ASSERT_TRUE(gone.send("POST /v1/audio:tag HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) +
                          "\r\n\r\n" + body));
    // The decoder blocks once the queue is full (128): 64 in the ring, 64 queued.
    ASSERT_TRUE(testing::wait_until([&] { return metric(http, "corepool_queue_depth") == 128; },
                                    std::chrono::seconds(20)));
  }
  EXPECT_TRUE(testing::wait_until([&] { return metric(http, "corepool_requests_cancelled_total") == 1; },
                                  std::chrono::seconds(10)));
  EXPECT_TRUE(testing::wait_until([&] { return metric(http, "corepool_segments_cancelled_total") >= 64; },
                                  std::chrono::seconds(10)));
  ::kill(workers[0], SIGCONT);
  EXPECT_TRUE(testing::wait_until([&] { return metric(http, "corepool_queue_depth") == 0; },
                                  std::chrono::seconds(60)));
  EXPECT_EQ(metric(http, R"(corepool_requests_total{endpoint="audio_tag",code="499",protocol="http"})"), 1);
  EXPECT_EQ(metric(http, "corepool_audio_requests_pending"), 0);
  EXPECT_EQ(infer(http, 1).status, 200);
  EXPECT_EQ(server.stop().exit_code, 0);
}

}  // namespace
}  // namespace corepool
