// Triton's system shared memory extension through `corepool serve`, end to
// end in both modes: a client registers POSIX shm objects, infers with the
// input read from one and the scores written to another, and gets what the
// same items give as JSON; every bad request gets its error and leaves the
// server serving, a truncated region included. Real binary, real shm objects.
#include <unistd.h>

#include <cstring>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/infer_support.h"
#include "tests/e2e/serve_support.h"
#include "tests/support/client_shm_object.h"
#include "tests/support/http_client.h"
#include "tests/support/temp_dir.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::ClientShmObject;
using testing::HttpClient;
using testing::HttpReply;
using testing::input_item;
using testing::ServeProcess;

constexpr const char* kInfer = "/v2/models/default/infer";
constexpr int kLabels = 4;  // the default tagger's speech, music, noise, silence

std::string register_body(const ClientShmObject& object, uint64_t offset, uint64_t size) {
  return json{{"key", object.key()}, {"offset", offset}, {"byte_size", size}}.dump();
}

// An infer request whose input (and, if `out_region` is set, output) is in shared memory.
std::string shm_infer(const std::string& in_region, uint64_t in_bytes, int batch, const std::string& out_region = "",
                      uint64_t out_bytes = 0, uint64_t in_offset = 0) {
  json in = {{"name", "input"},
             {"datatype", "FP32"},
             {"shape", testing::input_shape(batch)},
             {"parameters", {{"shared_memory_region", in_region}, {"shared_memory_byte_size", in_bytes}}}};
  if (in_offset != 0) in["parameters"]["shared_memory_offset"] = in_offset;
  json body = {{"id", "shm"}, {"inputs", {in}}};
  if (!out_region.empty()) {
    body["outputs"] = {{{"name", "scores"},
                        {"parameters", {{"shared_memory_region", out_region}, {"shared_memory_byte_size", out_bytes}}}}};
  }
  return body.dump();
}

class ClientShmE2eTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string path = dir_.path() + "/corepool.toml";
    std::ofstream(path) << "[engine]\nmode = \"" << GetParam() << "\"\nworkers = 1\nmax_batch = 4\n"
                        << "[serve]\nallow_client_shm = true\nallow_model_control = true\n";
    server_ = std::make_unique<ServeProcess>(dir_, std::vector<std::string>{}, std::vector<std::string>{},
                                             std::vector<std::string>{"--config", path});
    ASSERT_TRUE(server_->started()) << server_->log();
  }
  void TearDown() override {
    if (server_) {
      EXPECT_EQ(server_->stop().exit_code, 0) << server_->log();
    }
  }
  testing::TempDir dir_;
  std::unique_ptr<ServeProcess> server_;
};

TEST_P(ClientShmE2eTest, InputAndOutputThroughRegionsEqualTheSameItemsAsJson) {
  HttpClient http(server_->port());
  const int batch = 2;
  std::vector<float> data;
  for (int i = 0; i < batch; ++i) {
    const auto one = input_item(10 + i);
    data.insert(data.end(), one.begin(), one.end());
  }
  const uint64_t in_bytes = data.size() * sizeof(float), out_bytes = batch * kLabels * sizeof(float);
  // The input 64 bytes into its object, behind bytes that are not floats.
  ClientShmObject in(64 + in_bytes), out(out_bytes);
  const std::vector<unsigned char> junk(64, 0xff);
  in.put(0, junk.data(), junk.size());
  in.put(64, data.data(), in_bytes);
  ASSERT_EQ(http.post("/v2/systemsharedmemory/region/in/register", register_body(in, 0, 64 + in_bytes)).status, 200);
  ASSERT_EQ(http.post("/v2/systemsharedmemory/region/out/register", register_body(out, 0, out_bytes)).status, 200);
  const json status = json::parse(http.get("/v2/systemsharedmemory/status").body);
  ASSERT_EQ(status.size(), 2u) << status;

  const HttpReply r = http.post(kInfer, shm_infer("in", in_bytes, batch, "out", out_bytes, 64));
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer = json::parse(r.body);
  EXPECT_EQ(answer["id"], "shm");
  const json& o = answer["outputs"][0];
  EXPECT_FALSE(o.contains("data")) << r.body;
  EXPECT_EQ(o["shape"], json({batch, kLabels}));
  EXPECT_EQ(o["parameters"]["shared_memory_region"], "out");
  EXPECT_EQ(o["parameters"]["shared_memory_byte_size"], out_bytes);

  const auto raw = out.get(0, out_bytes);
  std::vector<float> scores(batch * kLabels);
  std::memcpy(scores.data(), raw.data(), out_bytes);
  const auto [body, headers] = testing::infer_request("json", data, batch);
  const HttpReply reference = http.post(kInfer, body, headers);
  ASSERT_EQ(reference.status, 200) << reference.body;
  const std::vector<float> expected = testing::scores_of(reference.body);
  ASSERT_EQ(expected.size(), scores.size());
  for (size_t i = 0; i < scores.size(); ++i) EXPECT_NEAR(scores[i], expected[i], 1e-5) << i;

  // The input from shm, the scores in the reply as usual.
  const HttpReply inline_out = http.post(kInfer, shm_infer("in", in_bytes, batch, "", 0, 64));
  ASSERT_EQ(inline_out.status, 200) << inline_out.body;
  const std::vector<float> direct = testing::scores_of(inline_out.body);
  for (size_t i = 0; i < direct.size(); ++i) EXPECT_NEAR(direct[i], expected[i], 1e-5) << i;

  EXPECT_EQ(http.post("/v2/systemsharedmemory/unregister", "").status, 200);
  EXPECT_EQ(json::parse(http.get("/v2/systemsharedmemory/status").body), json::array());
}

TEST_P(ClientShmE2eTest, EveryBadRequestGetsItsErrorAndTheServerKeepsServing) {
  HttpClient http(server_->port());
  const uint64_t item_bytes = testing::item_floats() * sizeof(float);
  ClientShmObject in(item_bytes);
  const auto one = input_item(3);
  in.put(0, one.data(), item_bytes);
  auto expect = [&](const HttpReply& r, int status, const std::string& text) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_THAT(r.body, HasSubstr(text));
  };
  expect(http.post("/v2/systemsharedmemory/region/a/register", R"({"byte_size": 4})"), 400, "key");
  expect(http.post("/v2/systemsharedmemory/region/a/register",
                   json{{"key", "/corepool-no-such-object"}, {"byte_size", 4}}.dump()),
         400, "no such shared memory object");
  expect(http.post("/v2/systemsharedmemory/region/a/register", register_body(in, 0, item_bytes + 1)), 400, "");
  expect(http.post("/v2/systemsharedmemory/region/a/register", register_body(in, 8, item_bytes)), 400, "");
  ASSERT_EQ(http.post("/v2/systemsharedmemory/region/a/register", register_body(in, 0, item_bytes)).status, 200);
  expect(http.post("/v2/systemsharedmemory/region/a/register", register_body(in, 0, item_bytes)), 400, "already registered");
  expect(http.post(kInfer, shm_infer("nope", item_bytes, 1)), 404, "nope");
  expect(http.post(kInfer, shm_infer("a", item_bytes - 4, 1)), 400, "shared_memory_byte_size");
  expect(http.post(kInfer, shm_infer("a", item_bytes, 1, "nope", kLabels * 4)), 404, "nope");
  expect(http.get("/v2/systemsharedmemory/region/nope/status"), 404, "nope");
  expect(http.get("/v2/systemsharedmemory/region/%ZZ/status"), 400, "");
  // A path that is not UTF-8 is still just an unknown endpoint, not a 500.
  expect(http.get("/v2/\xff\xfe"), 404, "no such endpoint");

  // The client truncates its object after registering it: a clear error, no SIGBUS.
  ASSERT_EQ(::ftruncate(in.fd(), 16), 0);
  expect(http.post(kInfer, shm_infer("a", item_bytes, 1)), 400, "truncated");
  EXPECT_EQ(http.get("/v2/health/live").status, 200);
  const auto [body, headers] = testing::infer_request("after", one, 1);
  EXPECT_EQ(http.post(kInfer, body, headers).status, 200);
}

INSTANTIATE_TEST_SUITE_P(Modes, ClientShmE2eTest, ::testing::Values("thread", "process"));

}  // namespace
}  // namespace corepool
