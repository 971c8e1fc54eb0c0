// The KServe v2 JSON layer (supervisor/serve/inference_protocol.cc) without a
// server: every malformed request names its field, nested and flat data are
// the same, binary data is checked byte for byte, paths parse strictly.
#include "supervisor/serve/inference_protocol.h"

#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace corepool::oip {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

ModelConfig waveform_model() {
  ModelConfig m;
  m.name = "vad";
  m.input = InputKind::kWaveform;
  m.sample_rate = 1000;
  m.segment_seconds = 0.004;  // 4 samples per item
  m.labels = {"a", "b"};
  m.thresholds = {0.5f, 0.5f};
  return m;
}

json request(json shape, json data, std::string datatype = "FP32") {
  return {{"id", "x"}, {"inputs", {{{"name", "input"}, {"shape", shape}, {"datatype", datatype}, {"data", data}}}}};
}

std::string error_of(const std::string& body, int64_t max_batch = 8) {
  try {
    parse_infer_request(body, waveform_model(), max_batch);
  } catch (const ProtocolError& e) {
    return e.what();
  }
  return "";
}

TEST(InferenceProtocolTest, FlatAndNestedDataGiveTheSameItems) {
  const auto flat = parse_infer_request(request({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}).dump(), waveform_model(), 8);
  const auto nested = parse_infer_request(request({2, 4}, {{1, 2, 3, 4}, {5, 6, 7, 8}}).dump(), waveform_model(), 8);
  ASSERT_EQ(flat.items.size(), 2u);
  EXPECT_EQ(flat.items, nested.items);
  EXPECT_EQ(flat.items[1], std::vector<float>({5, 6, 7, 8}));
  EXPECT_EQ(flat.id, "x");
}

TEST(InferenceProtocolTest, IntegerDataOfANumericDatatypeIsAccepted) {
  EXPECT_EQ(error_of(request({1, 4}, {1, 2, 3, 4}, "INT32").dump()), "");
}

TEST(InferenceProtocolTest, EveryMalformedRequestNamesItsField) {
  EXPECT_THAT(error_of("{"), HasSubstr("not valid JSON"));
  EXPECT_THAT(error_of("[1]"), HasSubstr("JSON object"));
  EXPECT_THAT(error_of("{}"), HasSubstr("missing \"inputs\""));
  EXPECT_THAT(error_of(R"({"inputs": [{}, {}]})"), HasSubstr("exactly one input"));
  json r = request({1, 4}, {1, 2, 3, 4});
  r["inputs"][0]["name"] = "x";
  EXPECT_THAT(error_of(r.dump()), HasSubstr("inputs[0].name"));
  EXPECT_THAT(error_of(request({1, 4}, {1, 2, 3, 4}, "BYTES").dump()), HasSubstr("inputs[0].datatype"));
  EXPECT_THAT(error_of(request({1, 5}, {1, 2, 3, 4, 5}).dump()), HasSubstr("expected [B, 4] with B = 1..8, got [1, 5]"));
  EXPECT_THAT(error_of(request({9, 4}, json::array()).dump()), HasSubstr("B = 1..8"));
  EXPECT_THAT(error_of(request({0, 4}, json::array()).dump()), HasSubstr("inputs[0].shape"));
  EXPECT_THAT(error_of(request({1, 4}, {1, 2, 3}).dump()), HasSubstr("3 elements, the shape needs 4"));
  EXPECT_THAT(error_of(request({1, 4}, {1, 2, 3, 4, 5}).dump()), HasSubstr("more elements than the shape"));
  EXPECT_THAT(error_of(request({1, 4}, {1, "2", 3, 4}).dump()), HasSubstr("element 1 is \"2\", not a number"));
  EXPECT_THAT(error_of(request({1, 4}, {1, 2, 1e300, 4}).dump()), HasSubstr("element 2 is not a finite FP32"));
  r = request({1, 4}, {1, 2, 3, 4});
  r["outputs"] = {{{"name", "logits"}}};
  EXPECT_THAT(error_of(r.dump()), HasSubstr("outputs[0]"));
  r = request({1, 4}, {1, 2, 3, 4});
  r["id"] = 7;
  EXPECT_THAT(error_of(r.dump()), HasSubstr("id: must be a string"));
}

TEST(InferenceProtocolTest, BinaryDataIsReadAfterTheJsonHeader) {
  json header = request({1, 4}, nullptr);
  header["inputs"][0].erase("data");
  header["inputs"][0]["parameters"] = {{"binary_data_size", 16}};
  const std::string text = header.dump();
  const float values[4] = {1.5f, -2, 3, 4};
  std::string body = text + std::string(reinterpret_cast<const char*>(values), sizeof(values));
  const auto parsed = parse_binary_infer_request(body, text.size(), waveform_model(), 8);
  EXPECT_EQ(parsed.items.at(0), std::vector<float>({1.5f, -2, 3, 4}));
  EXPECT_THAT([&] {
    try {
      parse_binary_infer_request(body.substr(0, body.size() - 1), text.size(), waveform_model(), 8);
    } catch (const ProtocolError& e) {
      return std::string(e.what());
    }
    return std::string();
  }(), HasSubstr("16 bytes declared, 15 sent"));
  EXPECT_THROW(parse_binary_infer_request(body, body.size() + 1, waveform_model(), 8), ProtocolError);
  EXPECT_THROW(parse_binary_infer_request(body, 3, waveform_model(), 8), ProtocolError);
  EXPECT_THROW(parse_infer_request(text, waveform_model(), 8), ProtocolError);  // binary without the header
}

TEST(InferenceProtocolTest, ResponseAndMetadataFollowTheProtocol) {
  const json out = json::parse(infer_response(waveform_model(), "r1", {{0.25f, 0.5f}, {1, 0}}));
  EXPECT_EQ(out["model_name"], "vad");
  EXPECT_EQ(out["id"], "r1");
  EXPECT_EQ(out["outputs"][0]["shape"], json({2, 2}));
  EXPECT_EQ(out["outputs"][0]["data"], json({0.25, 0.5, 1.0, 0.0}));
  const json meta = json::parse(model_metadata(waveform_model()));
  EXPECT_EQ(meta["inputs"][0]["shape"], json({-1, 4}));
  EXPECT_EQ(meta["outputs"][0]["shape"], json({-1, 2}));
  EXPECT_EQ(json::parse(server_metadata("9.9"))["version"], "9.9");
}

TEST(InferenceProtocolTest, ModelPathsParseStrictly) {
  EXPECT_EQ(parse_model_path("/v2/models/m")->action, "");
  EXPECT_EQ(parse_model_path("/v2/models/m/infer")->action, "infer");
  const auto v = parse_model_path("/v2/models/m/versions/1/ready");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->name, "m");
  EXPECT_EQ(v->version, "1");
  EXPECT_EQ(v->action, "ready");
  for (const char* bad : {"/v2/models", "/v2/models/", "/v2/models/m/", "/v2/models/m/explain", "/v2/models//infer",
                          "/v2/models/m/infer/x", "/v1/models/m"}) {
    EXPECT_FALSE(parse_model_path(bad)) << bad;
  }
}

}  // namespace
}  // namespace corepool::oip
