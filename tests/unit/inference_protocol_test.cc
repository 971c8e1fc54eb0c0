// The KServe v2 JSON layer (supervisor/triton/inference_protocol.cc) without a
// server: every malformed request names its field, nested and flat data are
// the same, binary data is checked byte for byte, paths parse strictly.
#include "supervisor/triton/inference_protocol.h"

#include <cmath>
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

std::string header_error(const TensorHeader& h, int64_t max_batch = 8) {
  try {
    check_tensor_header(h, waveform_model(), max_batch, "inputs[0]");
  } catch (const ProtocolError& e) {
    return e.what();
  }
  return "";
}

TEST(InferenceProtocolTest, TensorHeadersFromOtherCarriersAreCheckedLikeJson) {
  EXPECT_EQ(check_tensor_header({"input", "FP32", {3, 4}}, waveform_model(), 8, "inputs[0]"), 3);
  EXPECT_THAT(header_error({"x", "FP32", {1, 4}}), HasSubstr("inputs[0].name: the model's input is named \"input\""));
  EXPECT_THAT(header_error({"input", "INT32", {1, 4}}), HasSubstr("inputs[0].datatype: \"INT32\""));
  EXPECT_THAT(header_error({"input", "FP32", {1, 5}}), HasSubstr("inputs[0].shape: expected [B, 4] with B = 1..8, got [1, 5]"));
  EXPECT_THAT(header_error({"input", "FP32", {9, 4}}), HasSubstr("got [9, 4]"));
  EXPECT_THAT(header_error({"input", "FP32", {0, 4}}), HasSubstr("got [0, 4]"));
  EXPECT_THAT(header_error({"input", "FP32", {4}}), HasSubstr("got [4]"));
}

TEST(InferenceProtocolTest, RawFp32BytesBecomeItemsAndAreCheckedByteForByte) {
  const float values[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::string bytes(reinterpret_cast<const char*>(values), sizeof(values));
  const auto parsed = items_from_fp32_bytes("id7", 2, bytes, waveform_model(), "raw_input_contents[0]");
  EXPECT_EQ(parsed.id, "id7");
  ASSERT_EQ(parsed.items.size(), 2u);
  EXPECT_EQ(parsed.items[1], std::vector<float>({5, 6, 7, 8}));
  EXPECT_THROW(items_from_fp32_bytes("", 2, bytes.substr(1), waveform_model(), "w"), ProtocolError);
  std::string nan_bytes = bytes;
  const float nan = std::nanf("");
  std::memcpy(nan_bytes.data() + 12, &nan, sizeof(nan));
  try {
    items_from_fp32_bytes("", 2, nan_bytes, waveform_model(), "raw_input_contents[0]");
    ADD_FAILURE() << "a NaN was accepted";
  } catch (const ProtocolError& e) {
    EXPECT_THAT(e.what(), HasSubstr("raw_input_contents[0]: element 3 is not finite"));
  }
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

namespace corepool::oip {
namespace {

TEST(InferenceProtocolTest, TritonModelActionsParseAndOthersDoNot) {
  EXPECT_EQ(parse_model_path("/v2/models/m/config")->action, "config");
  EXPECT_EQ(parse_model_path("/v2/models/m/versions/1/stats")->action, "stats");
  EXPECT_FALSE(parse_model_path("/v2/models/m/versions/1/load"));
}

TEST(InferenceProtocolTest, RepositoryPathsParseStrictly) {
  const auto load = parse_repository_path("/v2/repository/models/m/load");
  ASSERT_TRUE(load);
  EXPECT_EQ(load->model, "m");
  EXPECT_EQ(load->action, "load");
  EXPECT_EQ(parse_repository_path("/v2/repository/models/m/unload")->action, "unload");
  for (const char* bad : {"/v2/repository/models/m", "/v2/repository/models//load", "/v2/repository/models/m/load/",
                          "/v2/repository/models/m/reload", "/v2/repository/index", "/v2/repository/models/a/b/load"}) {
    EXPECT_FALSE(parse_repository_path(bad)) << bad;
  }
}

TEST(InferenceProtocolTest, TritonsRequestTimeoutIsReadInMicroseconds) {
  ModelConfig model;
  model.name = "m";
  model.labels = {"a"};
  model.thresholds = {0.5f};
  std::string values;
  for (int64_t i = 0; i < model.item_floats(); ++i) values += (i ? ",0" : "0");
  auto body = [&](const std::string& params) {
    return R"({"parameters": )" + params +
           R"(, "inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 64, 101], "data": [)" + values +
           "]}]}";
  };
  EXPECT_EQ(parse_infer_request(body(R"({"timeout": 250000})"), model, 4).timeout_us, 250000u);
  EXPECT_EQ(parse_infer_request(body("{}"), model, 4).timeout_us, 0u);
  EXPECT_THROW(parse_infer_request(body(R"({"timeout": -1})"), model, 4), ProtocolError);
  EXPECT_THROW(parse_infer_request(body(R"({"timeout": "1s"})"), model, 4), ProtocolError);
  EXPECT_THROW(parse_infer_request(body("[]"), model, 4), ProtocolError);
}

TEST(InferenceProtocolTest, ServerMetadataListsTheExtensionsItIsGiven) {
  const auto meta = nlohmann::json::parse(server_metadata("1.0", {"a", "b"}));
  EXPECT_EQ(meta["extensions"], nlohmann::json({"a", "b"}));
  EXPECT_EQ(nlohmann::json::parse(server_metadata("1.0"))["extensions"], nlohmann::json({"binary_tensor_data"}));
}

}  // namespace
}  // namespace corepool::oip
