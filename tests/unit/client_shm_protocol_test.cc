// Triton's system shared memory extension as JSON and paths
// (supervisor/triton/client_shm_protocol.cc), without a server: the paths
// parse strictly, region names are percent-decoded as Triton's clients quote
// them, and every malformed body or infer parameter names its field.
#include "supervisor/triton/client_shm_protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace corepool::oip {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

template <class F>
std::string error_of(F&& parse) {
  try {
    parse();
  } catch (const ProtocolError& e) {
    return e.what();
  }
  return "";
}

std::string register_error(const std::string& body) {
  return error_of([&] { parse_shm_register_body(body); });
}
std::string infer_error(const json& body) {
  return error_of([&] { parse_infer_shm(body.dump()); });
}

json shm_params(json region = "in", json size = 32) {
  return {{"shared_memory_region", region}, {"shared_memory_byte_size", size}};
}

json shm_request(json params = shm_params()) {
  return {{"id", "r1"},
          {"inputs", {{{"name", "input"}, {"datatype", "FP32"}, {"shape", {2, 4}}, {"parameters", params}}}}};
}

TEST(ClientShmProtocolTest, TheFivePathsParse) {
  auto p = parse_shm_path("/v2/systemsharedmemory/status");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->action, ShmAction::kStatus);
  EXPECT_EQ(p->region, "");
  EXPECT_STREQ(p->method(), "GET");

  p = parse_shm_path("/v2/systemsharedmemory/region/in/status");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->action, ShmAction::kStatus);
  EXPECT_EQ(p->region, "in");

  p = parse_shm_path("/v2/systemsharedmemory/region/in/register");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->action, ShmAction::kRegister);
  EXPECT_EQ(p->region, "in");
  EXPECT_STREQ(p->method(), "POST");

  p = parse_shm_path("/v2/systemsharedmemory/unregister");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->action, ShmAction::kUnregister);
  EXPECT_EQ(p->region, "");

  p = parse_shm_path("/v2/systemsharedmemory/region/out/unregister");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->action, ShmAction::kUnregister);
  EXPECT_EQ(p->region, "out");
}

TEST(ClientShmProtocolTest, RegionNamesArePercentDecoded) {
  EXPECT_EQ(parse_shm_path("/v2/systemsharedmemory/region/my%20region%2fA/status")->region, "my region/A");
  EXPECT_EQ(parse_shm_path("/v2/systemsharedmemory/region/%C3%A9t%C3%A9/register")->region, "\xC3\xA9t\xC3\xA9");
  for (const char* bad : {"%zz", "%4", "a%", "%00", "%ff"}) {
    const std::string path = std::string("/v2/systemsharedmemory/region/") + bad + "/status";
    EXPECT_THAT(error_of([&] { parse_shm_path(path); }), HasSubstr("region name in the path")) << bad;
  }
}

TEST(ClientShmProtocolTest, OtherPathsAreNotOurs) {
  for (const char* path : {"/v2/systemsharedmemory", "/v2/systemsharedmemory/", "/v2/systemsharedmemory/status/",
                           "/v2/systemsharedmemory/register", "/v2/systemsharedmemory/region/in",
                           "/v2/systemsharedmemory/region/in/", "/v2/systemsharedmemory/region//status",
                           "/v2/systemsharedmemory/region/in/delete", "/v2/systemsharedmemory/region/a/b/status",
                           "/v2/systemsharedmemoryx/status", "/v2/cudasharedmemory/status", "/v2/models/m", ""}) {
    EXPECT_FALSE(parse_shm_path(path)) << path;
  }
}

TEST(ClientShmProtocolTest, ARegisterBodyParses) {
  auto body = parse_shm_register_body(R"({"key": "/k", "offset": 16, "byte_size": 18446744073709551615})");
  EXPECT_EQ(body.key, "/k");
  EXPECT_EQ(body.offset, 16u);
  EXPECT_EQ(body.byte_size, 18446744073709551615u);
  EXPECT_EQ(parse_shm_register_body(R"({"key": "/k", "byte_size": 8})").offset, 0u);
}

TEST(ClientShmProtocolTest, EveryMalformedRegisterBodyNamesItsField) {
  EXPECT_THAT(register_error("{"), HasSubstr("not valid JSON"));
  EXPECT_THAT(register_error("[]"), HasSubstr("must be a JSON object"));
  EXPECT_THAT(register_error(R"({"byte_size": 8})"), HasSubstr("key: missing"));
  EXPECT_THAT(register_error(R"({"key": 5, "byte_size": 8})"), HasSubstr("key: must be a string, got 5"));
  EXPECT_THAT(register_error(R"({"key": "/k"})"), HasSubstr("byte_size: missing"));
  EXPECT_THAT(register_error(R"({"key": "/k", "byte_size": -1})"), HasSubstr("byte_size: must be a byte count"));
  EXPECT_THAT(register_error(R"({"key": "/k", "byte_size": 1.5})"), HasSubstr("byte_size: must be a byte count"));
  EXPECT_THAT(register_error(R"({"key": "/k", "byte_size": "8"})"), HasSubstr("byte_size: must be a byte count"));
  EXPECT_THAT(register_error(R"({"key": "/k", "byte_size": 18446744073709551616})"),
              HasSubstr("byte_size: must be a byte count"));
  EXPECT_THAT(register_error(R"({"key": "/k", "byte_size": 8, "offset": -4})"), HasSubstr("offset: must be a byte count"));
  EXPECT_THAT(register_error(R"({"key": "/k", "byte_size": 8, "offset": null})"), HasSubstr("offset: must be"));
}

TEST(ClientShmProtocolTest, AnInputInSharedMemoryGivesItsHeaderAndRegion) {
  json params = shm_params();
  params["shared_memory_offset"] = 64;
  json req = shm_request(params);
  req["outputs"] = {{{"name", "scores"}, {"parameters", {{"binary_data", false}, {"shared_memory_region", "out"},
                                                         {"shared_memory_byte_size", 24}}}}};
  const InferShm shm = parse_infer_shm(req.dump());
  EXPECT_EQ(shm.id, "r1");
  ASSERT_TRUE(shm.input_shm && shm.input_header);
  EXPECT_EQ(shm.input_header->name, "input");
  EXPECT_EQ(shm.input_header->datatype, "FP32");
  EXPECT_EQ(shm.input_header->shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(shm.input_shm->region, "in");
  EXPECT_EQ(shm.input_shm->offset, 64u);
  EXPECT_EQ(shm.input_shm->byte_size, 32u);
  ASSERT_TRUE(shm.output_shm);
  EXPECT_EQ(shm.output_shm->region, "out");
  EXPECT_EQ(shm.output_shm->offset, 0u);
  EXPECT_EQ(shm.output_shm->byte_size, 24u);
}

TEST(ClientShmProtocolTest, ARequestWithoutSharedMemoryHasNone) {
  const json req = {{"inputs", {{{"name", "input"}, {"datatype", "FP32"}, {"shape", {1, 2}}, {"data", {1, 2}},
                                 {"parameters", {{"binary_data_size", 8}}}}}},
                    {"outputs", {{{"name", "scores"}, {"parameters", {{"binary_data", true}}}}}}};
  const InferShm shm = parse_infer_shm(req.dump());
  EXPECT_FALSE(shm.input_shm);
  EXPECT_FALSE(shm.input_header);
  EXPECT_FALSE(shm.output_shm);
  // Not a shared memory question: left for parse_infer_request to answer.
  EXPECT_FALSE(parse_infer_shm(R"({"inputs": 5})").input_shm);
}

TEST(ClientShmProtocolTest, EveryMalformedInferParameterNamesItsField) {
  EXPECT_THAT(error_of([] { parse_infer_shm("{"); }), HasSubstr("not valid JSON"));
  EXPECT_THAT(error_of([] { parse_infer_shm("[]"); }), HasSubstr("JSON object"));
  json r = shm_request();
  r["id"] = 3;
  EXPECT_THAT(infer_error(r), HasSubstr("id: must be a string"));

  const std::string p = "inputs[0].parameters.";
  EXPECT_THAT(infer_error(shm_request({{"shared_memory_byte_size", 32}})), HasSubstr(p + "shared_memory_region: missing"));
  EXPECT_THAT(infer_error(shm_request(shm_params(""))), HasSubstr(p + "shared_memory_region: must be a non-empty string"));
  EXPECT_THAT(infer_error(shm_request(shm_params(7))), HasSubstr(p + "shared_memory_region: must be a non-empty string"));
  EXPECT_THAT(infer_error(shm_request({{"shared_memory_region", "in"}})), HasSubstr(p + "shared_memory_byte_size: missing"));
  EXPECT_THAT(infer_error(shm_request(shm_params("in", "32"))), HasSubstr(p + "shared_memory_byte_size: must be a byte count"));
  EXPECT_THAT(infer_error(shm_request(shm_params("in", -32))), HasSubstr(p + "shared_memory_byte_size: must be a byte count"));
  json params = shm_params();
  params["shared_memory_offset"] = -1;
  EXPECT_THAT(infer_error(shm_request(params)), HasSubstr(p + "shared_memory_offset: must be a byte count"));
  params = shm_params();
  params["binary_data_size"] = 32;
  EXPECT_THAT(infer_error(shm_request(params)), HasSubstr(p + "binary_data_size: an input is either"));
  EXPECT_THAT(infer_error(shm_request(5)), HasSubstr("inputs[0].parameters: must be an object"));

  r = shm_request();
  r["inputs"][0]["data"] = {1, 2, 3};
  EXPECT_THAT(infer_error(r), HasSubstr("inputs[0].data: an input in shared memory"));
  r = shm_request();
  r["inputs"].push_back(r["inputs"][0]);
  EXPECT_THAT(infer_error(r), HasSubstr("inputs: the model takes exactly one input"));
  for (const char* field : {"name", "datatype", "shape"}) {
    r = shm_request();
    r["inputs"][0].erase(field);
    EXPECT_THAT(infer_error(r), HasSubstr(std::string("inputs[0].") + field + ": missing"));
  }
  r = shm_request();
  r["inputs"][0]["name"] = 1;
  EXPECT_THAT(infer_error(r), HasSubstr("inputs[0].name: must be a string"));
  r = shm_request();
  r["inputs"][0]["shape"] = {2, "4"};
  EXPECT_THAT(infer_error(r), HasSubstr("inputs[0].shape: must be an array of integers"));
}

TEST(ClientShmProtocolTest, EveryMalformedOutputNamesItsField) {
  json r = shm_request();
  r["outputs"] = json::array({"scores"});  // a name, not an object
  EXPECT_THAT(infer_error(r), HasSubstr("outputs[0]: the model has one output"));
  r["outputs"] = 5;
  EXPECT_THAT(infer_error(r), HasSubstr("outputs: must be an array"));
  r["outputs"] = {{{"name", "logits"}}};
  EXPECT_THAT(infer_error(r), HasSubstr("outputs[0]: the model has one output, named \"scores\""));
  r["outputs"] = {{{"name", "scores"}, {"parameters", "x"}}};
  EXPECT_THAT(infer_error(r), HasSubstr("outputs[0].parameters: must be an object"));
  r["outputs"] = {{{"name", "scores"}, {"parameters", {{"shared_memory_region", "out"}}}}};
  EXPECT_THAT(infer_error(r), HasSubstr("outputs[0].parameters.shared_memory_byte_size: missing"));
  r["outputs"] = {{{"name", "scores"}, {"parameters", shm_params("out", 24)}},
                  {{"name", "scores"}, {"parameters", shm_params("out2", 24)}}};
  EXPECT_THAT(infer_error(r), HasSubstr("outputs[1].parameters.shared_memory_region: \"scores\" already goes"));
}

}  // namespace
}  // namespace corepool::oip
