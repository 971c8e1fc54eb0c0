// The doors and the lame duck of `corepool serve` (issue 38 item 5), end to
// end: real binary, real loopback sockets, real signals. Without a token the
// model-control endpoints answer 403; with one, no or a wrong Bearer token is
// 401 (counted) and the right one works; a token file others may read stops
// the service at start. With serve.lame_duck_s, SIGTERM turns readiness 503
// at once while requests are still served, then the listener closes and the
// request in flight still completes.
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/infer_support.h"
#include "tests/e2e/serve_support.h"
#include "tests/support/http_client.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"
#include "tools/audio_synth.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::HttpClient;
using testing::HttpReply;
using testing::ServeProcess;
using Clock = std::chrono::steady_clock;

constexpr const char* kLoad = "/v2/repository/models/default/load";
constexpr const char* kUnload = "/v2/repository/models/default/unload";
constexpr const char* kRegister = "/v2/systemsharedmemory/region/r/register";
constexpr const char* kUnregister = "/v2/systemsharedmemory/unregister";

class ServeDoorsTest : public ::testing::Test {
 protected:
  std::string config(const std::string& engine, const std::string& serve) const {
    const std::string path = dir_.path() + "/corepool.toml";
    std::ofstream(path) << "[engine]\n" << engine << "\n[serve]\n" << serve << "\n";
    return path;
  }
  std::unique_ptr<ServeProcess> start(const std::string& engine, const std::string& serve) {
    return std::make_unique<ServeProcess>(dir_, std::vector<std::string>{}, std::vector<std::string>{},
                                          std::vector<std::string>{"--config", config(engine, serve)});
  }
  std::string token_file(const std::string& token, mode_t mode) const {
    const std::string path = dir_.path() + "/api.token";
    std::ofstream(path) << token << "\n";
    ::chmod(path.c_str(), mode);
    return path;
  }
  static double metric(HttpClient& http, const std::string& name) {
    return testing::metric(http.get("/metrics").body, name);
  }
  testing::TempDir dir_;
};

TEST_F(ServeDoorsTest, WithoutATokenModelControlAnswers403AndTheRestStaysOpen) {
  auto server = start("workers = 1", "allow_client_shm = true");
  ASSERT_TRUE(server->started()) << server->log();
  HttpClient http(server->port());
  for (const char* path : {kLoad, kUnload, kRegister, kUnregister}) {
    const HttpReply r = http.post(path, R"({"key": "/x", "byte_size": 4})");
    EXPECT_EQ(r.status, 403) << path << ": " << r.body;
    EXPECT_THAT(r.body, HasSubstr("serve.allow_model_control")) << path;
  }
  EXPECT_EQ(http.post("/v2/repository/index", "").status, 200);
  EXPECT_EQ(http.get("/v2/systemsharedmemory/status").status, 200);
  const auto [body, headers] = testing::infer_request("r1", testing::input_item(1));
  EXPECT_EQ(http.post("/v2/models/default/infer", body, headers).status, 200);
  EXPECT_EQ(metric(http, R"(corepool_model_control_refused_total{reason="forbidden"})"), 4);
  EXPECT_EQ(metric(http, R"(corepool_requests_total{endpoint="repository_load",code="403",protocol="http"})"), 1);
  EXPECT_EQ(server->stop().exit_code, 0);
}

TEST_F(ServeDoorsTest, WithATokenAWrongOrMissingBearerIs401AndTheRightOneLoadsAndUnloads) {
  const std::string token = "7f3c9e1a-door-token";
  auto server = start("workers = 1", "api_token_file = \"" + token_file(token, 0600) + "\"");
  ASSERT_TRUE(server->started()) << server->log();
  HttpClient http(server->port());
  HttpReply missing = http.post(kUnload, "");
  EXPECT_EQ(missing.status, 401) << missing.body;
  EXPECT_EQ(missing.headers["www-authenticate"], "Bearer realm=\"corepool\"");
  EXPECT_THAT(missing.body, HasSubstr("missing token"));
  for (const std::string& header : {"Bearer " + token + "x", "Bearer " + token.substr(1), "Basic " + token}) {
    const HttpReply wrong = http.post(kLoad, "", "Authorization: " + header + "\r\n");
    EXPECT_EQ(wrong.status, 401) << header << ": " << wrong.body;
    EXPECT_THAT(wrong.body, HasSubstr("wrong token"));
  }
  EXPECT_EQ(json::parse(http.get("/v2/models/default/ready").body)["ready"], true);  // nothing was unloaded
  const std::string bearer = "Authorization: Bearer " + token + "\r\n";
  EXPECT_EQ(http.post(kUnload, "", bearer).status, 200);
  EXPECT_EQ(http.get("/v2/models/default/ready").status, 503);
  const HttpReply load = http.post(kLoad, "", bearer);
  EXPECT_EQ(load.status, 200) << load.body;
  EXPECT_EQ(http.get("/v2/models/default/ready").status, 200);
  EXPECT_EQ(metric(http, R"(corepool_model_control_refused_total{reason="unauthenticated"})"), 4);
  EXPECT_EQ(metric(http, R"(corepool_requests_total{endpoint="repository_load",code="401",protocol="http"})"), 3);
  const testing::ProcessResult stopped = server->stop();
  EXPECT_EQ(stopped.exit_code, 0);
  EXPECT_THAT(stopped.err, ::testing::Not(HasSubstr(token)));  // the token never reaches the log
  EXPECT_THAT(stopped.err, HasSubstr("serving model"));  // the log is there, and the token is not in it
}

TEST_F(ServeDoorsTest, ATokenFileOthersMayReadStopsTheServiceWithTheReason) {
  const std::string path = token_file("abc", 0644);
  auto server = start("workers = 1", "api_token_file = \"" + path + "\"");
  EXPECT_FALSE(server->started());
  const testing::ProcessResult r = server->wait(std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("serve.api_token_file: " + path + " is readable by every user (mode 644)"));
}

// A fresh connection for each probe: a load balancer's health check opens
// one, and a closed listener shows as a refused connect.
std::optional<HttpReply> probe(int port, const std::string& path, const std::string& body = "",
                               const std::string& headers = "") {
  auto http = HttpClient::tcp(port);
  if (!http) return std::nullopt;
  return body.empty() && headers.empty() ? http->get(path) : http->post(path, body, headers);
}

// The in-flight request at the listener's close: the one worker is stopped
// (SIGSTOP) with an audio request queued, and woken only once connections are
// refused, so the request is in flight then whatever the timing.
TEST_F(ServeDoorsTest, LameDuckAnswersReady503AtOnceServesRequestsThenClosesAndDrains) {
  auto server = start("mode = \"process\"\nworkers = 1\nhang_timeout_ms = 3600000", "lame_duck_s = 2");
  ASSERT_TRUE(server->started()) << server->log();
  const int port = server->port();
  ASSERT_EQ(probe(port, "/v2/health/ready")->status, 200);
  const auto [body, headers] = testing::infer_request("r1", testing::input_item(1));
  // Everything slow is ready before SIGTERM: the window is for the requests.
  const std::vector<int> workers = testing::child_pids(server->pid());
  ASSERT_EQ(workers.size(), 1u);
  const std::string wav = dir_.path() + "/long.wav";
  synth::write_audio(wav, synth::demo_of_seconds(20));

  const Clock::time_point sigterm = Clock::now();
  server->signal(SIGTERM);
  ASSERT_TRUE(testing::wait_until([&] { return probe(port, "/v2/health/ready")->status == 503; },
                                  std::chrono::seconds(2)))
      << server->log();
  const double ready_ms = std::chrono::duration<double, std::milli>(Clock::now() - sigterm).count();
  // Still served in the window, on new connections: infer, liveness, metrics.
  const auto infer = probe(port, "/v2/models/default/infer", body, headers);
  ASSERT_TRUE(infer);
  EXPECT_EQ(infer->status, 200) << infer->body;
  EXPECT_EQ(probe(port, "/v2/health/live")->status, 200);
  EXPECT_EQ(testing::metric(probe(port, "/metrics")->body, "corepool_lame_duck"), 1);

  ASSERT_EQ(::kill(workers[0], SIGSTOP), 0);
  testing::Spawned tagger = testing::spawn_process(
      {testing::kCurl, "-s", "-o", dir_.path() + "/tag.json", "-w", "%{http_code}", "--data-binary", "@" + wav,
       server->url("/v1/audio:tag")},
      dir_.path());
  ASSERT_TRUE(testing::wait_until([&] {
    const auto m = probe(port, "/metrics");
    return m && testing::metric(m->body, "corepool_queue_depth") > 0;
  }, std::chrono::seconds(10))) << "the audio request was not queued inside the window";

  EXPECT_TRUE(testing::wait_until([&] { return !HttpClient::tcp(port); }, std::chrono::seconds(10)))
      << "the listener never closed";
  const double closed_ms = std::chrono::duration<double, std::milli>(Clock::now() - sigterm).count();
  EXPECT_GE(closed_ms, 1500) << "the listener closed before the lame-duck window ended";
  ::kill(workers[0], SIGCONT);
  const testing::ProcessResult tagged = testing::wait_process(tagger, std::chrono::seconds(30));
  EXPECT_EQ(tagged.out, "200");
  EXPECT_FALSE(json::parse(testing::read_file(dir_.path() + "/tag.json"))["events"].empty());
  const testing::ProcessResult stopped = server->wait(std::chrono::seconds(30));
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_THAT(stopped.err, HasSubstr("lame duck: readiness answers 503"));
  std::printf("[ doors    ] lame duck: ready 503 %.2f ms after SIGTERM, listener closed after %.0f ms, "
              "in-flight request 200\n", ready_ms, closed_ms);
}

}  // namespace
}  // namespace corepool
