// Triton's JSON for corepool models, without a server: http_status, the model
// configuration (field by field, in protobuf's JSON mapping of
// model_config.proto), the repository index entry and ModelStatistics'
// counting and rendering (supervisor/triton/triton_*.cc, model_statistics.cc).
#include <algorithm>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "supervisor/triton/model_statistics.h"
#include "supervisor/triton/triton_json.h"
#include "supervisor/triton/triton_service.h"

namespace corepool::triton {
namespace {

using json = nlohmann::json;

ModelConfig tagger() {
  ModelConfig m;
  m.name = "tagger";
  m.labels = {"speech", "music", "dog, barking"};
  m.thresholds = {0.5f, 0.5f, 0.5f};
  m.max_batch = 16;
  return m;
}

TEST(TritonJsonTest, EveryErrorKindHasItsHttpStatus) {
  EXPECT_EQ(http_status(Code::kOk), 200);
  EXPECT_EQ(http_status(Code::kInvalidArgument), 400);
  EXPECT_EQ(http_status(Code::kNotFound), 404);
  EXPECT_EQ(http_status(Code::kUnavailable), 503);
  EXPECT_EQ(http_status(Code::kResourceExhausted), 503);
  EXPECT_EQ(http_status(Code::kDeadlineExceeded), 504);
  EXPECT_EQ(http_status(Code::kAlreadyExists), 400);
  EXPECT_EQ(http_status(Code::kPermissionDenied), 403);
  EXPECT_EQ(http_status(Code::kInternal), 500);
  EXPECT_EQ(http_status(Code::kCancelled), 499);  // never sent: the client is gone
}

TEST(TritonJsonTest, ModelConfigHasTritonsFieldsForTheModel) {
  const ModelConfig model = tagger();
  ServingFacts facts{12, 3, 4, 250, "process", "bf16"};
  const json c = json::parse(model_config_json(model, facts));
  EXPECT_EQ(c["name"], "tagger");
  EXPECT_EQ(c["platform"], "pytorch_libtorch");
  EXPECT_EQ(c["backend"], "pytorch");
  EXPECT_EQ(c["max_batch_size"], 12);
  EXPECT_EQ(c["input"], json::parse(R"([{"name":"input","data_type":"TYPE_FP32","dims":[1,64,101]}])"));
  EXPECT_EQ(c["output"], json::parse(R"([{"name":"scores","data_type":"TYPE_FP32","dims":[3]}])"));
  EXPECT_EQ(c["instance_group"], json::parse(R"([{"name":"tagger","kind":"KIND_CPU","count":3}])"));
  EXPECT_EQ(c["dynamic_batching"], json::parse(R"({"max_queue_delay_microseconds":250,"preferred_batch_size":[4]})"));
  EXPECT_EQ(c["parameters"]["mode"], json::parse(R"({"string_value":"process"})"));
  EXPECT_EQ(c["parameters"]["optimize"], json::parse(R"({"string_value":"bf16"})"));
  // A label may hold a comma: the list is a JSON array in the string.
  EXPECT_EQ(json::parse(c["parameters"]["labels"]["string_value"].get<std::string>()), json(model.labels));
  // Only fields of model_config.proto's ModelConfig, nothing a protobuf parser would reject.
  for (const auto& [key, value] : c.items()) {
    static const std::vector<std::string> kKnown = {"name", "platform", "backend", "max_batch_size", "input", "output",
                                                    "instance_group", "dynamic_batching", "parameters"};
    EXPECT_NE(std::find(kKnown.begin(), kKnown.end(), key), kKnown.end()) << key;
  }
}

TEST(TritonJsonTest, RepositoryEntrySaysWhyAModelIsUnavailable) {
  EXPECT_EQ(json::parse(repository_entry_json("m", "1", true, "")),
            json::parse(R"({"name":"m","version":"1","state":"READY","reason":""})"));
  EXPECT_EQ(json::parse(repository_entry_json("m", "1", false, "unloaded"))["state"], "UNAVAILABLE");
}

TEST(ModelStatisticsTest, RequestsAndExecutionsAreCountedWithTheirDurations) {
  ModelStatistics stats;
  stats.record_success(3, 1000, {100, 200, 300, 40});
  stats.record_success(1, 500, {10, 20, 30, 4});
  stats.record_failure(70);
  stats.record_execution(3, {0, 200, 300, 40});
  stats.record_execution(1, {0, 20, 30, 4});
  stats.record_execution(1, {0, 21, 31, 5});
  const json s = json::parse(stats.to_json("m", "1"));
  EXPECT_EQ(s["name"], "m");
  EXPECT_EQ(s["version"], "1");
  EXPECT_EQ(s["inference_count"], 4);
  EXPECT_EQ(s["execution_count"], 3);
  const json& i = s["inference_stats"];
  EXPECT_EQ(i["success"], json::parse(R"({"count":2,"ns":1500})"));
  EXPECT_EQ(i["fail"], json::parse(R"({"count":1,"ns":70})"));
  EXPECT_EQ(i["queue"], json::parse(R"({"count":2,"ns":110})"));
  EXPECT_EQ(i["compute_input"], json::parse(R"({"count":2,"ns":220})"));
  EXPECT_EQ(i["compute_infer"], json::parse(R"({"count":2,"ns":330})"));
  EXPECT_EQ(i["compute_output"], json::parse(R"({"count":2,"ns":44})"));
  ASSERT_EQ(s["batch_stats"].size(), 2u);  // sizes that ran, ascending
  EXPECT_EQ(s["batch_stats"][0]["batch_size"], 1);
  EXPECT_EQ(s["batch_stats"][0]["compute_infer"], json::parse(R"({"count":2,"ns":61})"));
  EXPECT_EQ(s["batch_stats"][1]["batch_size"], 3);
  EXPECT_EQ(s["batch_stats"][1]["compute_output"], json::parse(R"({"count":1,"ns":40})"));
  EXPECT_GT(s["last_inference"].get<uint64_t>(), 1600000000000u);  // ms since the epoch, not seconds
}

TEST(ModelStatisticsTest, ConcurrentRecordingLosesNothing) {
  ModelStatistics stats;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        stats.record_success(1, 2, {1, 1, 1, 1});
        stats.record_execution(1 + i % 2, {0, 1, 1, 1});
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(stats.success_count(), 40000u);
  EXPECT_EQ(stats.execution_count(), 40000u);
  const json s = json::parse(stats.to_json("m", "1"));
  EXPECT_EQ(s["inference_stats"]["success"]["ns"], 80000);
  EXPECT_EQ(s["batch_stats"][1]["compute_infer"]["count"], 20000);
}

}  // namespace
}  // namespace corepool::triton
