// `corepool serve` end to end: the real binary, real sockets, real curl, real
// signals. Every endpoint in both modes, scores equal to in-process inference,
// audio events equal to `corepool batch`, each error code, 503 backpressure,
// SIGTERM drain, the Unix socket and the systemd notify sequence.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/ffmpeg_cli.h"
#include "tests/support/notify_listener.h"
#include "tests/e2e/infer_support.h"
#include "tests/e2e/serve_support.h"
#include "tests/support/http_client.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tools/audio_synth.h"
#include "worker/engine.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using nlohmann::json;
using testing::curl;
using testing::HttpAnswer;
using testing::ServeProcess;

constexpr const char* kInfer = "/v2/models/default/infer";

// One log-mel item computed in-process from a generated PCM segment, and the
// scores the model gives it: what the server must reproduce.
struct Reference {
  std::vector<float> input;   // item_floats() values
  std::vector<float> scores;  // labels.size() values
};

Reference reference_item(float frequency) {
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  Engine engine(model);
  const int n = model->config.segment_samples();
  std::vector<float> pcm(n);
  for (int i = 0; i < n; ++i) pcm[i] = 0.3f * std::sin(2 * M_PI * frequency * i / model->config.sample_rate);
  const torch::Tensor features = engine.features({pcm.data()}).contiguous();
  Reference r;
  r.input.assign(features.data_ptr<float>(), features.data_ptr<float>() + features.numel());
  r.scores = engine.infer({pcm.data()})[0];
  return r;
}

json infer_body(const std::vector<std::vector<float>>& items) {
  const json shape = testing::input_shape(static_cast<int64_t>(items.size()));
  json data = json::array();
  for (const auto& item : items) {
    for (float v : item) data.push_back(v);
  }
  return {{"id", "t1"}, {"inputs", {{{"name", "input"}, {"datatype", "FP32"}, {"shape", shape}, {"data", data}}}}};
}

std::string write_text(const testing::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

HttpAnswer post_file(const testing::TempDir& dir, const std::string& url, const std::string& path,
                     std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"-X", "POST", "--data-binary", "@" + path};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(url);
  return curl(dir, args);
}

class ServeModeTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::vector<std::string> mode_args(std::vector<std::string> more = {}) const {
    std::vector<std::string> a = {"--mode", GetParam(), "--workers", "2"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  testing::TempDir dir_;
};

TEST_P(ServeModeTest, HealthAndMetadataEndpointsAnswerCurl) {
  ServeProcess server(dir_, mode_args());
  ASSERT_TRUE(server.started()) << server.log();
  HttpAnswer a = curl(dir_, {server.url("/v2/health/live")});
  EXPECT_EQ(a.code, 200);
  EXPECT_EQ(json::parse(a.body), json({{"live", true}}));
  EXPECT_THAT(a.headers, HasSubstr("content-type: application/json"));
  a = curl(dir_, {server.url("/v2/health/ready")});
  EXPECT_EQ(a.code, 200);
  EXPECT_EQ(json::parse(a.body)["ready"], true);
  a = curl(dir_, {server.url("/v2")});
  EXPECT_EQ(a.code, 200);
  EXPECT_EQ(json::parse(a.body)["name"], "corepool");
  a = curl(dir_, {server.url("/v2/models/default")});
  ASSERT_EQ(a.code, 200);
  const json meta = json::parse(a.body);
  // The shape docs/api.md documents (2 s of log-mel), written out rather than
  // read from model.toml: a new segment length changes the served API, and
  // this test then says so.
  EXPECT_EQ(meta["inputs"][0]["shape"], json({-1, 1, 64, 201}));
  EXPECT_EQ(meta["outputs"][0]["shape"], json({-1, 4}));
  EXPECT_EQ(meta["parameters"]["labels"].size(), 4u);
  EXPECT_EQ(curl(dir_, {server.url("/v2/models/default/ready")}).code, 200);
  EXPECT_EQ(curl(dir_, {server.url("/v2/models/default/versions/1/ready")}).code, 200);
  EXPECT_EQ(curl(dir_, {"-I", server.url("/v2/health/live")}).code, 200);  // HEAD
  EXPECT_EQ(server.stop().exit_code, 0);
}

TEST_P(ServeModeTest, UnknownPathsModelsAndMethodsGetTheirCodes) {
  ServeProcess server(dir_, mode_args());
  ASSERT_TRUE(server.started()) << server.log();
  HttpAnswer a = curl(dir_, {server.url("/nope")});
  EXPECT_EQ(a.code, 404);
  EXPECT_THAT(json::parse(a.body)["error"].get<std::string>(), HasSubstr("/nope"));
  a = curl(dir_, {server.url("/v2/models/other")});
  EXPECT_EQ(a.code, 404);
  EXPECT_THAT(a.body, HasSubstr("this server serves \\\"default\\\""));
  EXPECT_EQ(curl(dir_, {server.url("/v2/models/default/versions/7")}).code, 404);
  a = curl(dir_, {"-X", "DELETE", server.url("/v2/health/live")});
  EXPECT_EQ(a.code, 405);
  EXPECT_THAT(a.headers, HasSubstr("allow: get"));
  a = curl(dir_, {server.url("/v2/models/default/infer")});  // GET
  EXPECT_EQ(a.code, 405);
  EXPECT_THAT(a.headers, HasSubstr("allow: post"));
  EXPECT_EQ(curl(dir_, {server.url("/v2/health/live")}).code, 200);
  EXPECT_EQ(server.stop().exit_code, 0);
}

TEST_P(ServeModeTest, InferGivesTheScoresOfInProcessInference) {
  const Reference r1 = reference_item(440), r2 = reference_item(1000);
  ServeProcess server(dir_, mode_args());
  ASSERT_TRUE(server.started()) << server.log();
  const std::string path = write_text(dir_, "infer.json", infer_body({r1.input, r2.input}).dump());
  const HttpAnswer a = post_file(dir_, server.url("/v2/models/default/infer"), path,
                                 {"-H", "Content-Type: application/json"});
  ASSERT_EQ(a.code, 200) << a.body;
  const json out = json::parse(a.body);
  EXPECT_EQ(out["id"], "t1");
  EXPECT_EQ(out["model_name"], "default");
  ASSERT_EQ(out["outputs"][0]["name"], "scores");
  EXPECT_EQ(out["outputs"][0]["shape"], json({2, 4}));
  const auto data = out["outputs"][0]["data"].get<std::vector<float>>();
  ASSERT_EQ(data.size(), 8u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(data[i], r1.scores[i], 1e-4) << i;
    EXPECT_NEAR(data[4 + i], r2.scores[i], 1e-4) << i;
  }
  EXPECT_EQ(server.stop().exit_code, 0);
}

TEST_P(ServeModeTest, BinaryTensorDataGivesTheSameScores) {
  const Reference r = reference_item(440);
  ServeProcess server(dir_, mode_args());
  ASSERT_TRUE(server.started()) << server.log();
  json header = infer_body({r.input});
  header["inputs"][0].erase("data");
  header["inputs"][0]["parameters"] = {{"binary_data_size", r.input.size() * sizeof(float)}};
  const std::string text = header.dump();
  const std::string body = text + std::string(reinterpret_cast<const char*>(r.input.data()), r.input.size() * 4);
  const std::string path = write_text(dir_, "infer.bin", body);
  const HttpAnswer a = post_file(dir_, server.url("/v2/models/default/infer"), path,
                                 {"-H", "Inference-Header-Content-Length: " + std::to_string(text.size()),
                                  "-H", "Content-Type: application/octet-stream"});
  ASSERT_EQ(a.code, 200) << a.body;
  const auto data = json::parse(a.body)["outputs"][0]["data"].get<std::vector<float>>();
  ASSERT_EQ(data.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(data[i], r.scores[i], 1e-4);
  EXPECT_EQ(server.stop().exit_code, 0);
}

TEST_P(ServeModeTest, MalformedInferRequestsGet400AndTheServerCarriesOn) {
  ServeProcess server(dir_, mode_args());
  ASSERT_TRUE(server.started()) << server.log();
  const int floats = testing::item_floats();
  json wrong_shape = infer_body({std::vector<float>(floats, 0.f)});
  wrong_shape["inputs"][0]["shape"] = {1, floats};
  json wrong_type = infer_body({std::vector<float>(floats, 0.f)});
  wrong_type["inputs"][0]["datatype"] = "BYTES";
  json short_data = infer_body({std::vector<float>(100, 0.f)});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "not valid JSON"},
      {"[]", "JSON object"},
      {R"({"inputs": []})", "exactly one input"},
      {wrong_shape.dump(), "inputs[0].shape"},
      {wrong_type.dump(), "inputs[0].datatype"},
      {short_data.dump(), "inputs[0].data: 100 elements, the shape needs " + std::to_string(floats)},
  };
  for (const auto& [body, expected] : cases) {
    const std::string path = write_text(dir_, "bad.json", body);
    const HttpAnswer a = post_file(dir_, server.url("/v2/models/default/infer"), path);
    EXPECT_EQ(a.code, 400) << body.substr(0, 80);
    EXPECT_THAT(json::parse(a.body)["error"].get<std::string>(), HasSubstr(expected)) << a.body;
  }
  EXPECT_EQ(curl(dir_, {server.url("/v2/health/live")}).code, 200);
  EXPECT_EQ(server.stop().exit_code, 0);
}

TEST_P(ServeModeTest, AudioTagAnswersTheEventsBatchWrites) {
  const std::string wav = dir_.path() + "/demo.wav";
  synth::write_audio(wav, synth::demo_of_seconds(20));
  const testing::ProcessResult batch = testing::run_process(
      {COREPOOL_BIN, "--log-level", "warn", "batch", "--model", COREPOOL_DEFAULT_MODEL, "--out", "-", "--no-progress", wav},
      dir_.path());
  ASSERT_EQ(batch.exit_code, 0) << batch.err;
  json expected = json::array();
  for (const auto& line : testing::lines_of(batch.out)) {
    json j = json::parse(line);
    if (j.contains("summary")) continue;
    j.erase("file");
    expected.push_back(j);
  }
  ASSERT_FALSE(expected.empty());
  ServeProcess server(dir_, mode_args());
  ASSERT_TRUE(server.started()) << server.log();
  const HttpAnswer a = post_file(dir_, server.url("/v1/audio:tag"), wav, {"-H", "Content-Type: audio/wav"});
  ASSERT_EQ(a.code, 200) << a.body;
  const json out = json::parse(a.body);
  EXPECT_EQ(out["events"], expected);
  EXPECT_NEAR(out["duration"].get<double>(), synth::duration_seconds(synth::demo_of_seconds(20)), 1e-3);
  EXPECT_EQ(out["model"], "default");
  EXPECT_EQ(server.stop().exit_code, 0);
}

// A damaged stretch costs the stretch, not the request: the answer lists it
// as batch's summary does (an MP3 made by the ffmpeg tool, 2 kB flipped in
// its middle).
TEST_P(ServeModeTest, AudioTagOfADamagedMp3ListsWhatCouldNotBeDecoded) {
  if (!testing::have_ffmpeg()) GTEST_SKIP() << "the ffmpeg command-line tool is not installed (make deps)";
  const std::string wav = dir_.path() + "/demo.wav", mp3 = dir_.path() + "/demo.mp3";
  const auto spec = synth::demo_of_seconds(20);
  const double seconds = synth::duration_seconds(spec);
  synth::write_audio(wav, spec);
  ASSERT_TRUE(testing::ffmpeg("-i " + wav + " " + mp3));
  std::string bytes = testing::read_file(mp3);
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 2000; ++i) bytes[i] = char(bytes[i] ^ 0x5A);
  std::ofstream(mp3, std::ios::binary | std::ios::trunc) << bytes;
  ServeProcess server(dir_, mode_args());
  ASSERT_TRUE(server.started()) << server.log();
  const HttpAnswer a = post_file(dir_, server.url("/v1/audio:tag"), mp3);
  ASSERT_EQ(a.code, 200) << a.body;
  const json out = json::parse(a.body);
  ASSERT_TRUE(out.contains("skipped")) << a.body;
  EXPECT_GT(out["skipped"]["seconds"].get<double>(), 0.0);
  EXPECT_NEAR(out["skipped"]["at"][0].get<double>(), seconds / 2, 2.0);
  EXPECT_NEAR(out["duration"].get<double>(), seconds, 0.2);
  EXPECT_FALSE(out["events"].empty());
  EXPECT_EQ(server.stop().exit_code, 0);
}

TEST_P(ServeModeTest, BadAudioGets415Or400WithTheReason) {
  const std::vector<std::string> damaged = synth::write_damaged_files(dir_.path());
  ServeProcess server(dir_, mode_args());
  ASSERT_TRUE(server.started()) << server.log();
  auto post = [&](const std::string& name) {
    return post_file(dir_, server.url("/v1/audio:tag"), dir_.path() + "/" + name);
  };
  HttpAnswer a = post("not_audio.wav");
  EXPECT_EQ(a.code, 415) << a.body;
  EXPECT_THAT(json::parse(a.body)["error"].get<std::string>(), HasSubstr("request body: not an audio file"));
  for (const char* name : {"truncated.wav", "zero_rate.wav", "many_channels.wav", "nan.wav", "empty.wav"}) {
    a = post(name);
    EXPECT_EQ(a.code, 400) << name << ": " << a.body;
    EXPECT_THAT(json::parse(a.body)["error"].get<std::string>(), HasSubstr("request body")) << name;
  }
  a = post("zero_bytes.wav");
  EXPECT_EQ(a.code, 400);
  EXPECT_THAT(a.body, HasSubstr("empty body"));
  EXPECT_EQ(curl(dir_, {server.url("/v2/health/live")}).code, 200);
  EXPECT_EQ(server.stop().exit_code, 0);
}

TEST_P(ServeModeTest, MetricsCountRequestsWorkersAndMemory) {
  ServeProcess server(dir_, mode_args());
  ASSERT_TRUE(server.started()) << server.log();
  const Reference r = reference_item(440);
  const std::string path = write_text(dir_, "infer.json", infer_body({r.input}).dump());
  for (int i = 0; i < 3; ++i) ASSERT_EQ(post_file(dir_, server.url("/v2/models/default/infer"), path).code, 200);
  EXPECT_EQ(curl(dir_, {server.url("/nope")}).code, 404);
  const HttpAnswer a = curl(dir_, {server.url("/metrics")});
  ASSERT_EQ(a.code, 200);
  EXPECT_THAT(a.headers, HasSubstr("content-type: text/plain; version=0.0.4"));
  const std::string& m = a.body;
  EXPECT_EQ(testing::metric(m, R"(corepool_requests_total{endpoint="infer",code="200",protocol="http"})"), 3);
  EXPECT_EQ(testing::metric(m, R"(corepool_requests_total{endpoint="not_found",code="404",protocol="http"})"), 1);
  EXPECT_EQ(testing::metric(m, R"(corepool_request_duration_seconds_count{endpoint="infer",protocol="http"})"), 3);
  EXPECT_EQ(testing::metric(m, R"(corepool_request_duration_seconds_bucket{endpoint="infer",protocol="http",le="+Inf"})"), 3);
  EXPECT_GT(testing::metric(m, R"(corepool_worker_busy_seconds_total{worker="0"})") +
                testing::metric(m, R"(corepool_worker_busy_seconds_total{worker="1"})"), 0);
  EXPECT_EQ(testing::metric(m, "corepool_queue_depth"), 0);
  EXPECT_GT(testing::metric(m, "corepool_queue_capacity"), 0);
  EXPECT_EQ(testing::metric(m, "corepool_workers_ready"), 1);
  EXPECT_EQ(testing::metric(m, "corepool_worker_restarts_total"), 0);
  EXPECT_GT(testing::metric(m, R"(corepool_memory_pss_bytes{process="supervisor"})"), 0);
  EXPECT_GT(testing::metric(m, R"(corepool_allocator_bytes{stat="allocated"})"), 0);
  EXPECT_GT(testing::metric(m, R"(corepool_http_responses_total{code="200"})"), 0);
  if (GetParam() == "process") {
    EXPECT_GT(testing::metric(m, R"(corepool_memory_rss_bytes{process="worker-0"})"), 0);
    EXPECT_GT(testing::metric(m, R"(corepool_memory_pss_bytes{process="worker-1"})"), 0);
  }
  EXPECT_EQ(server.stop().exit_code, 0);
}

INSTANTIATE_TEST_SUITE_P(BothModes, ServeModeTest, ::testing::Values("thread", "process"),
                         [](const auto& info) { return info.param; });

class ServeTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
};

// A body over serve.max_body_mb is refused before it is read in full.
TEST_F(ServeTest, ABodyOverTheLimitGets413) {
  const std::string config = write_text(dir_, "c.toml", "[serve]\nmax_body_mb = 1\n");
  ServeProcess server(dir_, {"--workers", "1"}, {}, {"--config", config});
  ASSERT_TRUE(server.started()) << server.log();
  const std::string path = write_text(dir_, "big.wav", std::string(2 << 20, 'x'));
  const HttpAnswer a = post_file(dir_, server.url("/v1/audio:tag"), path);
  EXPECT_EQ(a.code, 413) << a.body << a.error;
  EXPECT_EQ(curl(dir_, {server.url("/v2/health/live")}).code, 200);
  EXPECT_EQ(server.stop().exit_code, 0);
}

// The queue holds queue_depth segments; a request that does not fit is
// answered 503 with Retry-After at once, never queued without bound. The one
// worker is stopped (SIGSTOP) before the queue is filled, so nothing drains
// it until the test says so: no timing window.
TEST_F(ServeTest, AFullQueueAnswers503WithRetryAfter) {
  const std::string config = write_text(dir_, "c.toml",
                                        "[engine]\nmode = \"process\"\nworkers = 1\nqueue_depth = 4\nmax_batch = 1\n"
                                        "hang_timeout_ms = 3600000\n[serve]\nretry_after_s = 3\n");
  ServeProcess server(dir_, {}, {}, {"--config", config});
  ASSERT_TRUE(server.started()) << server.log();
  const std::vector<int> workers = testing::child_pids(server.pid());
  ASSERT_EQ(workers.size(), 1u);
  ASSERT_EQ(::kill(workers[0], SIGSTOP), 0);
  ASSERT_TRUE(testing::wait_until([&] { return testing::process_state(workers[0]) == 'T'; },
                                  std::chrono::seconds(10)));
  // Four items fill the queue exactly; their answer waits for the worker.
  const Reference r = reference_item(440);
  std::vector<float> four;
  for (int i = 0; i < 4; ++i) four.insert(four.end(), r.input.begin(), r.input.end());
  const auto [held_body, held_headers] = testing::infer_request("held", four, 4);
  testing::HttpReply held;
  std::thread holder([&, body = held_body, headers = held_headers] {
    testing::HttpClient http(server.port());
    held = http.post(kInfer, body, headers);
  });
  testing::HttpClient http(server.port());
  const bool full = testing::wait_until([&] {
    return testing::metric(http.get("/metrics").body, "corepool_queue_depth") == 4;
  }, std::chrono::seconds(60));
  EXPECT_TRUE(full) << http.get("/metrics").body;
  const auto [body, headers] = testing::infer_request("one", r.input);
  const testing::HttpReply refused = http.post(kInfer, body, headers);
  EXPECT_EQ(refused.status, 503) << refused.error << refused.body;
  EXPECT_EQ(refused.headers.count("retry-after") ? refused.headers.at("retry-after") : "", "3");
  EXPECT_THAT(json::parse(refused.body)["error"].get<std::string>(), HasSubstr("queue is full"));
  // The worker wakes: the held request gets its scores, and there is room again.
  ::kill(workers[0], SIGCONT);
  holder.join();
  EXPECT_EQ(held.status, 200) << held.error << held.body;
  EXPECT_EQ(testing::scores_of(held.body).size(), 4 * r.scores.size());
  const testing::HttpReply after = http.post(kInfer, body, headers);
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(server.stop().exit_code, 0);
}

// SIGTERM: the listener closes, the request in flight still gets its answer,
// then the process exits 0 and tells systemd STOPPING=1. The one worker is
// stopped (SIGSTOP) before the request and woken once the server drains, so
// the request is in flight at SIGTERM: no timing window.
TEST_F(ServeTest, SigtermDrainsTheRequestInFlightAndExitsZero) {
  testing::NotifyListener notify;
  const std::string config =
      write_text(dir_, "c.toml", "[engine]\nmode = \"process\"\nworkers = 1\nhang_timeout_ms = 3600000\n");
  ServeProcess server(dir_, {}, {"NOTIFY_SOCKET=" + notify.path()}, {"--config", config});
  ASSERT_TRUE(server.started()) << server.log();
  const std::vector<int> workers = testing::child_pids(server.pid());
  ASSERT_EQ(workers.size(), 1u);
  ASSERT_EQ(::kill(workers[0], SIGSTOP), 0);
  const std::string wav = dir_.path() + "/long.wav";
  synth::write_audio(wav, synth::demo_of_seconds(40));
  testing::Spawned tagger = testing::spawn_process(
      {testing::kCurl, "-s", "-o", dir_.path() + "/tag.json", "-w", "%{http_code}", "--data-binary", "@" + wav,
       server.url("/v1/audio:tag")},
      dir_.path());
  ASSERT_TRUE(testing::wait_until([&] {
    return testing::metric(curl(dir_, {server.url("/metrics")}).body, "corepool_queue_depth") > 0;
  }, std::chrono::seconds(60)));
  server.signal(SIGTERM);
  EXPECT_TRUE(testing::wait_until([&] { return server.log().find("draining") != std::string::npos; },
                                  std::chrono::seconds(60))) << server.log();
  ::kill(workers[0], SIGCONT);
  const testing::ProcessResult stopped = server.wait();
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_THAT(stopped.err, HasSubstr("draining"));
  const testing::ProcessResult tagged = testing::wait_process(tagger, std::chrono::seconds(60));
  EXPECT_EQ(tagged.out, "200");
  EXPECT_FALSE(json::parse(testing::read_file(dir_.path() + "/tag.json"))["events"].empty());
  EXPECT_TRUE(notify.wait_for(testing::NotifyListener::has("STOPPING=1"), std::chrono::seconds(5)));
}

// /proc/<pid>/<what> of a live process, as text (environ: NULs as newlines).
std::string proc_text(int pid, const std::string& what) {
  std::string text = testing::read_file("/proc/" + std::to_string(pid) + "/" + what);
  std::replace(text.begin(), text.end(), '\0', '\n');
  return text;
}

// `corepool` is the launcher: it executes corepool-engine with jemalloc
// preloaded, so that LibTorch loads once. Checked from outside: the service's
// program, the environment of its last exec (which a re-exec would have
// marked COREPOOL_ALLOCATOR_REEXEC) and its mapped libraries. Asked for the
// system allocator, the engine re-executes itself once without jemalloc.
TEST_F(ServeTest, TheLauncherStartsTheEngineOnJemallocWithoutAReExec) {
  for (const std::string allocator : {"jemalloc", "system"}) {
    ServeProcess server(dir_, {"--workers", "1"}, {}, {"--allocator", allocator});
    ASSERT_TRUE(server.started()) << server.log();
    const std::string exe = std::filesystem::read_symlink("/proc/" + std::to_string(server.pid()) + "/exe");
    EXPECT_THAT(exe, ::testing::EndsWith("/corepool-engine")) << allocator;
    const std::string exec_env = "\n" + proc_text(server.pid(), "environ");
    const std::string maps = proc_text(server.pid(), "maps");
    if (allocator == "jemalloc") {
      EXPECT_THAT(exec_env, HasSubstr("\nCOREPOOL_LAUNCHED_PRELOAD="));
      EXPECT_THAT(exec_env, ::testing::Not(HasSubstr("COREPOOL_ALLOCATOR_REEXEC=")));
      EXPECT_THAT(maps, HasSubstr("libjemalloc"));
    } else {
      EXPECT_THAT(exec_env, HasSubstr("\nCOREPOOL_ALLOCATOR_REEXEC="));
      EXPECT_THAT(maps, ::testing::Not(HasSubstr("libjemalloc")));
    }
    EXPECT_EQ(curl(dir_, {server.url("/v2/health/ready")}).code, 200) << allocator;
    EXPECT_EQ(server.stop().exit_code, 0) << allocator;
  }
}

// READY=1 only once every worker is up, STATUS lines, RELOADING=1 with
// MONOTONIC_USEC then READY=1 around a SIGHUP, WATCHDOG=1 while healthy,
// STOPPING=1 at the end; every message from the supervisor's own pid.
TEST_F(ServeTest, SystemdHearsTheWholeLifecycle) {
  testing::NotifyListener notify;
  ServeProcess server(dir_, {"--mode", "process", "--workers", "2"},
                      {"NOTIFY_SOCKET=" + notify.path(), "WATCHDOG_USEC=200000"});
  ASSERT_TRUE(server.started()) << server.log();
  ASSERT_TRUE(notify.wait_for(testing::NotifyListener::has("READY=1"), std::chrono::seconds(10)));
  EXPECT_EQ(testing::metric(curl(dir_, {server.url("/metrics")}).body, "corepool_workers_ready"), 1);
  EXPECT_TRUE(notify.wait_for(testing::NotifyListener::has("WATCHDOG=1"), std::chrono::seconds(5)));
  server.signal(SIGHUP);
  ASSERT_TRUE(notify.wait_for([](const std::vector<std::string>& m) {
    return std::count(m.begin(), m.end(), "READY=1") == 2;
  }, std::chrono::seconds(60))) << server.log();
  EXPECT_EQ(testing::metric(curl(dir_, {server.url("/metrics")}).body, "corepool_generation"), 2);
  EXPECT_EQ(server.stop().exit_code, 0);
  const auto messages = notify.messages();
  const auto at = [&](const std::string& m) { return std::find(messages.begin(), messages.end(), m) - messages.begin(); };
  EXPECT_LT(at("READY=1"), at("RELOADING=1"));
  EXPECT_LT(at("RELOADING=1"), at("STOPPING=1"));
  EXPECT_TRUE(std::any_of(messages.begin(), messages.end(),
                          [](const std::string& m) { return m.rfind("MONOTONIC_USEC=", 0) == 0; }));
  EXPECT_TRUE(std::any_of(messages.begin(), messages.end(),
                          [](const std::string& m) { return m.rfind("STATUS=generation 1", 0) == 0; }));
  for (const auto& d : notify.datagrams()) EXPECT_EQ(d.pid, server.pid()) << d.text;
}

// Garbage never crashes the service nor grows it: JSON infer requests cut at
// many offsets, random bytes to every POST endpoint, a WAV cut at many
// offsets; each gets a 4xx, and the process serves on at the same size.
TEST_F(ServeTest, TruncatedAndRandomBodiesGet4xxAndLeaveTheServerIntact) {
  ServeProcess server(dir_, {"--mode", "process", "--workers", "1"});
  ASSERT_TRUE(server.started()) << server.log();
  const Reference r = reference_item(440);
  const std::string good = infer_body({r.input}).dump();
  const std::string wav_path = dir_.path() + "/short.wav";
  synth::write_audio(wav_path, synth::demo_of_seconds(2));
  const std::string wav = testing::read_file(wav_path);
  auto rss = [&] {
    return testing::metric(curl(dir_, {server.url("/metrics")}).body, R"(corepool_memory_rss_bytes{process="supervisor"})");
  };
  const double before = rss();
  std::mt19937 rng(7);
  for (int i = 0; i < 16; ++i) {
    const size_t cut = good.size() * static_cast<size_t>(i) / 16;
    const std::string path = write_text(dir_, "cut.json", good.substr(0, cut));
    const int code = post_file(dir_, server.url("/v2/models/default/infer"), path).code;
    EXPECT_EQ(code, 400) << "cut at " << cut;
    std::string noise(1 + rng() % 4096, '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    const std::string noise_path = write_text(dir_, "noise.bin", noise);
    EXPECT_EQ(post_file(dir_, server.url("/v2/models/default/infer"), noise_path).code, 400);
    EXPECT_EQ(post_file(dir_, server.url("/v1/audio:tag"), noise_path).code, 415);
    const size_t wav_cut = 1 + wav.size() * static_cast<size_t>(i) / 16;
    const std::string wav_cut_path = write_text(dir_, "cut.wav", wav.substr(0, wav_cut));
    const int wav_code = post_file(dir_, server.url("/v1/audio:tag"), wav_cut_path).code;
    EXPECT_TRUE(wav_code == 400 || wav_code == 415) << "wav cut at " << wav_cut << ": " << wav_code;
  }
  EXPECT_EQ(curl(dir_, {server.url("/v2/health/live")}).code, 200);
  EXPECT_EQ(post_file(dir_, server.url("/v2/models/default/infer"), write_text(dir_, "ok.json", good)).code, 200);
  EXPECT_LT(rss() - before, 32.0 * 1024 * 1024);
  EXPECT_EQ(testing::metric(curl(dir_, {server.url("/metrics")}).body, "corepool_worker_restarts_total"), 0);
  EXPECT_EQ(server.stop().exit_code, 0);
}

TEST_F(ServeTest, AUnixSocketServesWithMode0660AndIsRemovedAtExit) {
  const std::string sock = dir_.path() + "/corepool.sock";
  ServeProcess server(dir_, {"--workers", "1", "--listen", "", "--unix", sock});
  ASSERT_TRUE(testing::wait_until([&] { return fs::exists(sock); }, std::chrono::seconds(60))) << server.log();
  EXPECT_EQ(fs::status(sock).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::group_write);
  const HttpAnswer a = curl(dir_, {"--unix-socket", sock, "http://localhost/v2/health/live"});
  EXPECT_EQ(a.code, 200) << a.error;
  EXPECT_EQ(server.stop().exit_code, 0);
  EXPECT_FALSE(fs::exists(sock));
}

// systemd-socket-activate passes a listening socket as fd 3, as systemd would.
TEST_F(ServeTest, SocketActivationServesOnTheInheritedSocket) {
  const int port = testing::free_port();
  ServeProcess server(dir_, {"--workers", "1"}, {}, {},
                      {"/usr/bin/systemd-socket-activate", "-l", "127.0.0.1:" + std::to_string(port),
                       "--fdname=http"},
                      /*wait=*/false);
  // Activation is lazy: the service starts on the first connection.
  const HttpAnswer a = curl(dir_, {"--retry", "5", "--retry-connrefused",
                                   "http://127.0.0.1:" + std::to_string(port) + "/v2/health/live"});
  EXPECT_EQ(a.code, 200) << a.error << server.log();
  EXPECT_THAT(server.log(), HasSubstr("socket(s) from systemd"));
  EXPECT_EQ(server.stop().exit_code, 0);
}

TEST_F(ServeTest, BadListenAddressesFailWithAClearError) {
  testing::ProcessResult r = testing::run_process(
      {COREPOOL_BIN, "serve", "--model", COREPOOL_DEFAULT_MODEL, "--grpc-listen", "", "--listen", "localhost"},
      dir_.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--listen: \"localhost\" is not host:port"));
  ServeProcess first(dir_, {"--workers", "1"});
  ASSERT_TRUE(first.started()) << first.log();
  r = testing::run_process({COREPOOL_BIN, "serve", "--model", COREPOOL_DEFAULT_MODEL, "--workers", "1",
                            "--grpc-listen", "", "--listen", "127.0.0.1:" + std::to_string(first.port())},
                           dir_.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("address already in use"));
}

}  // namespace
}  // namespace corepool
