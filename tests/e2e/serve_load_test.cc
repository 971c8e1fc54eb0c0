// `corepool serve` under real load: wrk drives infer requests through two
// reloads (one of them to a different model) and not one request fails; a
// thousand idle keep-alive connections are held while the API keeps answering.
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/infer_support.h"
#include "tests/e2e/serve_support.h"
#include "tests/support/http_client.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;
using testing::curl;
using testing::ServeProcess;

constexpr const char* kWrk = "/usr/bin/wrk";

// A wrk script that POSTs one infer request of the default model's shape.
std::string write_infer_script(const testing::TempDir& dir) {
  json data = json::array();
  for (int i = 0; i < testing::item_floats(); ++i) data.push_back((i % 17) * 0.1);
  const json body = {
      {"inputs", {{{"name", "input"}, {"datatype", "FP32"}, {"shape", testing::input_shape(1)}, {"data", data}}}}};
  std::ofstream(dir.path() + "/infer.json") << body.dump();
  const std::string script = dir.path() + "/infer.lua";
  std::ofstream(script) << "wrk.method = \"POST\"\n"
                        << "wrk.headers[\"Content-Type\"] = \"application/json\"\n"
                        << "local f = io.open(\"" << dir.path() << "/infer.json\", \"rb\")\n"
                        << "wrk.body = f:read(\"*a\")\nf:close()\n";
  return script;
}

// A copy of the default model whose labels have other names: a reload to it
// is visible in the model's metadata.
std::string renamed_model(const testing::TempDir& dir) {
  const fs::path to = fs::path(dir.path()) / "model2";
  fs::create_directories(to);
  fs::copy_file(fs::path(COREPOOL_DEFAULT_MODEL) / "model.pt", to / "model.pt");
  std::string toml = testing::read_file(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml");
  toml = std::regex_replace(toml, std::regex("\"speech\""), "\"voice\"");
  std::ofstream(to / "model.toml") << toml;
  return to.string();
}

double metric_of(const testing::TempDir& dir, const ServeProcess& server, const std::string& name) {
  return testing::metric(curl(dir, {server.url("/metrics")}).body, name);
}

// corepool_requests_total of the infer endpoint, every protocol: answered 200
// (`ok`) or anything else.
double infer_requests(const std::string& metrics, bool ok) {
  std::istringstream in(metrics);
  double sum = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("corepool_requests_total{endpoint=\"infer\",", 0) != 0) continue;
    if ((line.find("code=\"200\"") != std::string::npos) == ok) sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// Triton's statistics against /metrics, read between two /metrics readings
// that agree (counters only grow, so the statistics between them are of the
// same moment; wrk's last requests may still be answered, or cancelled,
// after it exits).
void expect_statistics_equal_metrics(const testing::TempDir& dir, const ServeProcess& server) {
  std::string metrics = curl(dir, {server.url("/metrics")}).body;
  json stats;
  auto settled = [&] {
    stats = json::parse(curl(dir, {server.url("/v2/models/default/stats")}).body)["model_stats"][0];
    const std::string again = curl(dir, {server.url("/metrics")}).body;
    const bool same = infer_requests(again, true) == infer_requests(metrics, true) &&
                      infer_requests(again, false) == infer_requests(metrics, false) &&
                      testing::metric(again, "corepool_batches_total") == testing::metric(metrics, "corepool_batches_total");
    metrics = again;
    return same;
  };
  ASSERT_TRUE(testing::wait_until(settled, std::chrono::seconds(10))) << metrics;
  const json& is = stats["inference_stats"];
  EXPECT_GT(is["success"]["count"].get<double>(), 20);
  EXPECT_EQ(is["success"]["count"].get<double>(), infer_requests(metrics, true)) << metrics << stats.dump();
  EXPECT_EQ(is["fail"]["count"].get<double>(), infer_requests(metrics, false)) << metrics << stats.dump();
  // One item per request in this load. Executions are forward() calls, and
  // /metrics counts them across the generations too. (Segments are not
  // compared: those of a request wrk cut off at its end ran, unanswered.)
  EXPECT_EQ(stats["inference_count"].get<double>(), is["success"]["count"].get<double>());
  EXPECT_EQ(stats["execution_count"].get<double>(), testing::metric(metrics, "corepool_batches_total"));
}

TEST(ServeLoadTest, ReloadsUnderWrkLoadFailNoRequest) {
  testing::TempDir dir;
  const std::string config = dir.path() + "/corepool.toml";
  std::ofstream(config) << "[engine]\nmode = \"process\"\nworkers = 2\n[model]\ndir = \"" << COREPOOL_DEFAULT_MODEL << "\"\n";
  ServeProcess server(dir, {}, {}, {"--config", config});
  ASSERT_TRUE(server.started()) << server.log();
  // wrk runs until told to stop (SIGINT: it prints its summary and exits 0),
  // once requests have been answered after the second reload too; its -d is
  // only a bound.
  const testing::Spawned wrk = testing::spawn_process(
      {kWrk, "-t2", "-c8", "-d120s", "--timeout", "10s", "-s", write_infer_script(dir),
       server.url("/v2/models/default/infer")},
      dir.path());
  const char* ok = R"(corepool_requests_total{endpoint="infer",code="200",protocol="http"})";
  ASSERT_TRUE(testing::wait_until([&] { return metric_of(dir, server, ok) > 20; }, std::chrono::seconds(30)));
  server.signal(SIGHUP);
  ASSERT_TRUE(testing::wait_until([&] { return metric_of(dir, server, "corepool_generation") == 2; },
                                  std::chrono::seconds(30))) << server.log();
  server.signal(SIGHUP);
  ASSERT_TRUE(testing::wait_until([&] { return metric_of(dir, server, "corepool_generation") == 3; },
                                  std::chrono::seconds(30))) << server.log();
  const double answered = metric_of(dir, server, ok);
  ASSERT_TRUE(testing::wait_until([&] { return metric_of(dir, server, ok) > answered + 20; },
                                  std::chrono::seconds(30))) << "the load stopped at the second reload";
  ::kill(wrk.pid, SIGINT);
  const testing::ProcessResult load = testing::wait_process(wrk, std::chrono::seconds(60));
  ASSERT_EQ(load.exit_code, 0) << load.err;
  EXPECT_THAT(load.out, HasSubstr("requests in"));
  const std::string metrics = curl(dir, {server.url("/metrics")}).body;
  EXPECT_THAT(load.out, Not(HasSubstr("Non-2xx"))) << metrics << server.log();
  EXPECT_THAT(load.out, Not(HasSubstr("Socket errors")));
  EXPECT_EQ(testing::metric(metrics, "corepool_reloads_failed_total"), 0);
  EXPECT_THAT(metrics, Not(HasSubstr("endpoint=\"infer\",code=\"5")));
  // Statistics span the three generations, as /metrics' request counts do.
  expect_statistics_equal_metrics(dir, server);
  EXPECT_TRUE(testing::wait_until([&] { return server.log().find("generation 2 retired") != std::string::npos; },
                                  std::chrono::seconds(30))) << server.log();
  const testing::ProcessResult stopped = server.stop();
  EXPECT_EQ(stopped.exit_code, 0);
  EXPECT_THAT(stopped.err, HasSubstr("generation 1 retired"));
}

TEST(ServeLoadTest, AReloadToAnotherModelServesItAndABadOneKeepsTheOld) {
  testing::TempDir dir;
  const std::string config = dir.path() + "/corepool.toml";
  auto write_config = [&](const std::string& model_dir) {
    std::ofstream(config) << "[engine]\nmode = \"process\"\nworkers = 1\n[model]\ndir = \"" << model_dir << "\"\n";
  };
  write_config(COREPOOL_DEFAULT_MODEL);
  // No --model on the command line: the config file decides at every reload.
  const testing::Spawned child = testing::spawn_process(
      {COREPOOL_BIN, "--config", config, "serve", "--listen", "127.0.0.1:0", "--grpc-listen", ""}, dir.path());
  std::smatch m;
  std::string log;
  ASSERT_TRUE(testing::wait_until([&] {
    log = testing::read_file(child.err_path);
    return std::regex_search(log, m, std::regex("on http://[^ ]*:([0-9]+)"));
  }, std::chrono::seconds(60)));
  const std::string base = "http://127.0.0.1:" + std::string(m[1]);
  auto labels = [&] { return json::parse(curl(dir, {base + "/v2/models/default"}).body)["parameters"]["labels"]; };
  EXPECT_EQ(labels()[0], "speech");
  write_config(renamed_model(dir));
  ::kill(child.pid, SIGHUP);
  EXPECT_TRUE(testing::wait_until([&] { return labels()[0] == "voice"; }, std::chrono::seconds(30)));
  write_config(dir.path() + "/no-such-model");
  ::kill(child.pid, SIGHUP);
  EXPECT_TRUE(testing::wait_until([&] {
    return testing::read_file(child.err_path).find("reload failed, generation 2 keeps serving") != std::string::npos;
  }, std::chrono::seconds(30)));
  EXPECT_EQ(labels()[0], "voice");
  EXPECT_EQ(testing::metric(curl(dir, {base + "/metrics"}).body, "corepool_reloads_failed_total"), 1);
  ::kill(child.pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(child, std::chrono::seconds(60)).exit_code, 0);
}

// One thousand clients connect, make one request each and stay idle on
// keep-alive; the server holds them all and keeps answering others at once.
TEST(ServeLoadTest, AThousandIdleKeepAliveConnectionsAreHeldWithoutHarm) {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
  ASSERT_GE(lim.rlim_cur, 1100u) << "this test needs 1100 file descriptors";
  testing::TempDir dir;
  ServeProcess server(dir, {"--workers", "1"});
  ASSERT_TRUE(server.started()) << server.log();
  const double rss_before = metric_of(dir, server, R"(corepool_memory_rss_bytes{process="supervisor"})");
  std::vector<std::unique_ptr<testing::HttpClient>> clients;
  for (int i = 0; i < 1000; ++i) {
    clients.push_back(testing::HttpClient::tcp(server.port(), 60));
    ASSERT_NE(clients.back(), nullptr) << i;
    ASSERT_TRUE(clients.back()->send("GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")) << i;
  }
  for (auto& client : clients) {  // every one answered, none closed
    const auto reply = client->read_reply();
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 200);
  }
  const std::string metrics = curl(dir, {server.url("/metrics")}).body;
  EXPECT_GE(testing::metric(metrics, "corepool_http_connections_open"), 1000);
  const double rss_after = testing::metric(metrics, R"(corepool_memory_rss_bytes{process="supervisor"})");
  EXPECT_LT(rss_after - rss_before, 64.0 * 1024 * 1024) << "idle connections must cost kilobytes each, not more";
  const testing::HttpAnswer live = curl(dir, {server.url("/v2/health/live")});
  EXPECT_EQ(live.code, 200);
  clients.clear();
  EXPECT_TRUE(testing::wait_until([&] { return metric_of(dir, server, "corepool_http_connections_open") <= 1; },
                                  std::chrono::seconds(30)));
  EXPECT_EQ(server.stop().exit_code, 0);
}

}  // namespace
}  // namespace corepool
