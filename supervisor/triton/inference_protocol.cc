// KServe v2 JSON for corepool models. Every check names the field it failed
// on, so a client can fix its request from the 400 alone.
#include "supervisor/triton/inference_protocol.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

namespace corepool::oip {
namespace {

using json = nlohmann::json;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string expected_shape(const ModelConfig& model, int64_t max_batch) {
  std::string s = "[B";
  for (int64_t d : model.item_shape()) s += ", " + std::to_string(d);
  return s + "] with B = 1.." + std::to_string(max_batch);
}

const json& member(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) throw ProtocolError(where + ": missing \"" + key + "\"");
  return *it;
}

// `dims` checked against [B, item_shape...]; returns B.
int64_t check_dims(const std::vector<int64_t>& dims, const ModelConfig& model, int64_t max_batch,
                   const std::string& where) {
  const std::vector<int64_t> item = model.item_shape();
  bool ok = dims.size() == item.size() + 1 && dims[0] >= 1 && dims[0] <= max_batch;
  for (size_t i = 0; ok && i < item.size(); ++i) ok = dims[i + 1] == item[i];
  if (!ok) {
    throw ProtocolError(where + ".shape: expected " + expected_shape(model, max_batch) + ", got " + shape_text(dims));
  }
  return dims[0];
}

// The shape of inputs[0], checked against [B, item_shape...]; returns B.
int64_t check_shape(const json& input, const ModelConfig& model, int64_t max_batch) {
  const json& shape = member(input, "shape", "inputs[0]");
  if (!shape.is_array()) throw ProtocolError("inputs[0].shape: must be an array of integers");
  std::vector<int64_t> dims;
  for (const json& d : shape) {
    if (!d.is_number_integer()) throw ProtocolError("inputs[0].shape: must be an array of integers");
    dims.push_back(d.get<int64_t>());
  }
  return check_dims(dims, model, max_batch, "inputs[0]");
}

// Little-endian FP32 bytes, every value finite.
std::vector<float> floats_of(std::string_view bytes, const std::string& where) {
  std::vector<float> flat(bytes.size() / sizeof(float));
  std::memcpy(flat.data(), bytes.data(), flat.size() * sizeof(float));  // x86-64 and aarch64 are little-endian
  for (size_t i = 0; i < flat.size(); ++i) {
    if (!std::isfinite(flat[i])) throw ProtocolError(where + ": element " + std::to_string(i) + " is not finite");
  }
  return flat;
}

void check_datatype(const json& input) {
  const json& dt = member(input, "datatype", "inputs[0]");
  static const char* kAccepted[] = {"FP32", "FP64", "FP16", "INT8", "INT16", "INT32", "INT64",
                                    "UINT8", "UINT16", "UINT32", "UINT64"};
  if (dt.is_string()) {
    for (const char* a : kAccepted) {
      if (dt.get<std::string>() == a) return;
    }
  }
  throw ProtocolError("inputs[0].datatype: " + dt.dump() + " is not a numeric datatype (the model takes FP32)");
}

// Row-major flattening of flat or nested "data"; every leaf a finite number.
void flatten(const json& data, std::vector<float>& out, size_t limit) {
  if (data.is_array()) {
    for (const json& v : data) flatten(v, out, limit);
    return;
  }
  if (!data.is_number()) throw ProtocolError("inputs[0].data: element " + std::to_string(out.size()) +
                                             " is " + data.dump() + ", not a number");
  if (out.size() == limit) throw ProtocolError("inputs[0].data: more elements than the shape holds");
  const double v = data.get<double>();
  if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max()) {
    throw ProtocolError("inputs[0].data: element " + std::to_string(out.size()) + " is not a finite FP32 value");
  }
  out.push_back(static_cast<float>(v));
}

void check_outputs(const json& req) {
  auto it = req.find("outputs");
  if (it == req.end()) return;
  if (!it->is_array()) throw ProtocolError("outputs: must be an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& o = (*it)[i];
    auto name = o.is_object() ? o.find("name") : o.end();
    if (!o.is_object() || name == o.end() || !name->is_string() || name->get<std::string>() != kOutputName) {
      throw ProtocolError("outputs[" + std::to_string(i) + "]: the model has one output, named \"" +
                          std::string(kOutputName) + "\"");
    }
  }
}

// Everything but the data: the request object, its one input, the batch.
struct Header {
  std::string id;
  int64_t batch = 0;
  uint64_t timeout_us = 0;
};

const json& the_input(const json& req, const ModelConfig& model, int64_t max_batch, Header& header) {
  if (!req.is_object()) throw ProtocolError("the request body must be a JSON object");
  if (auto id = req.find("id"); id != req.end()) {
    if (!id->is_string()) throw ProtocolError("id: must be a string");
    header.id = id->get<std::string>();
  }
  if (auto params = req.find("parameters"); params != req.end()) {
    if (!params->is_object()) throw ProtocolError("parameters: must be an object");
    if (auto timeout = params->find("timeout"); timeout != params->end()) {
      if (!timeout->is_number_unsigned()) {
        throw ProtocolError("parameters.timeout: must be microseconds (an unsigned integer)");
      }
      header.timeout_us = timeout->get<uint64_t>();
    }
  }
  const json& inputs = member(req, "inputs", "request");
  if (!inputs.is_array() || inputs.size() != 1 || !inputs[0].is_object()) {
    throw ProtocolError("inputs: the model takes exactly one input object, named \"" + std::string(kInputName) + "\"");
  }
  const json& input = inputs[0];
  const json& name = member(input, "name", "inputs[0]");
  if (!name.is_string() || name.get<std::string>() != kInputName) {
    throw ProtocolError("inputs[0].name: the model's input is named \"" + std::string(kInputName) + "\", got " +
                        name.dump());
  }
  check_datatype(input);
  header.batch = check_shape(input, model, max_batch);
  check_outputs(req);
  return input;
}

InferRequest split(Header header, std::vector<float> flat, int64_t item_floats) {
  InferRequest out;
  out.id = std::move(header.id);
  out.batch = header.batch;
  out.timeout_us = header.timeout_us;
  out.items.reserve(header.batch);
  for (int64_t b = 0; b < header.batch; ++b) {
    out.items.emplace_back(flat.begin() + b * item_floats, flat.begin() + (b + 1) * item_floats);
  }
  return out;
}

json parse_json(std::string_view text) {
  json req = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (req.is_discarded()) throw ProtocolError("the request body is not valid JSON");
  return req;
}

}  // namespace

InferRequest parse_infer_request(std::string_view body, const ModelConfig& model, int64_t max_batch) {
  const json req = parse_json(body);
  Header header;
  const json& input = the_input(req, model, max_batch, header);
  if (auto p = input.find("parameters"); p != input.end() && p->is_object() && p->contains("binary_data_size")) {
    throw ProtocolError("inputs[0].parameters.binary_data_size: binary data needs the "
                        "Inference-Header-Content-Length header");
  }
  const size_t want = static_cast<size_t>(header.batch * model.item_floats());
  std::vector<float> flat;
  flat.reserve(want);
  flatten(member(input, "data", "inputs[0]"), flat, want);
  if (flat.size() != want) {
    throw ProtocolError("inputs[0].data: " + std::to_string(flat.size()) + " elements, the shape needs " +
                        std::to_string(want));
  }
  return split(std::move(header), std::move(flat), model.item_floats());
}

InferRequest parse_binary_infer_request(std::string_view body, size_t json_bytes, const ModelConfig& model,
                                        int64_t max_batch) {
  if (json_bytes > body.size()) {
    throw ProtocolError("Inference-Header-Content-Length: " + std::to_string(json_bytes) +
                        " is larger than the body (" + std::to_string(body.size()) + " bytes)");
  }
  const json req = parse_json(body.substr(0, json_bytes));
  Header header;
  const json& input = the_input(req, model, max_batch, header);
  if (input.contains("data")) throw ProtocolError("inputs[0]: binary data and \"data\" are mutually exclusive");
  const json* size = nullptr;
  if (auto p = input.find("parameters"); p != input.end() && p->is_object() && p->contains("binary_data_size")) {
    size = &(*p)["binary_data_size"];
  }
  if (!size || !size->is_number_unsigned()) {
    throw ProtocolError("inputs[0].parameters.binary_data_size: missing or not a byte count");
  }
  const std::string_view data = body.substr(json_bytes);
  const size_t want = static_cast<size_t>(header.batch * model.item_floats());
  if (input["datatype"] != "FP32") throw ProtocolError("inputs[0].datatype: binary data must be FP32");
  if (size->get<uint64_t>() != data.size() || data.size() != want * sizeof(float)) {
    throw ProtocolError("inputs[0].parameters.binary_data_size: " + std::to_string(size->get<uint64_t>()) +
                        " bytes declared, " + std::to_string(data.size()) + " sent, the shape needs " +
                        std::to_string(want * sizeof(float)));
  }
  return split(std::move(header), floats_of(data, "inputs[0]"), model.item_floats());
}

int64_t check_tensor_header(const TensorHeader& header, const ModelConfig& model, int64_t max_batch,
                            const std::string& where) {
  if (header.name != kInputName) {
    throw ProtocolError(where + ".name: the model's input is named \"" + std::string(kInputName) + "\", got \"" +
                        header.name + "\"");
  }
  if (header.datatype != "FP32") {
    throw ProtocolError(where + ".datatype: \"" + header.datatype + "\"; raw tensor data must be FP32");
  }
  return check_dims(header.shape, model, max_batch, where);
}

InferRequest items_from_fp32_bytes(std::string id, int64_t batch, std::string_view bytes, const ModelConfig& model,
                                   const std::string& where) {
  const size_t want = static_cast<size_t>(batch * model.item_floats()) * sizeof(float);
  if (bytes.size() != want) {
    throw ProtocolError(where + ": " + std::to_string(bytes.size()) + " bytes of data, the shape needs " +
                        std::to_string(want) + " (FP32)");
  }
  Header header;
  header.id = std::move(id);
  header.batch = batch;
  return split(std::move(header), floats_of(bytes, where), model.item_floats());
}

std::string infer_response(const ModelConfig& model, const std::string& id,
                           const std::vector<std::vector<float>>& scores) {
  return infer_response(model.name, id, scores, static_cast<int64_t>(model.labels.size()));
}

std::string infer_response(const std::string& model_name, const std::string& id,
                           const std::vector<std::vector<float>>& scores, int64_t labels) {
  json data = json::array();
  for (const auto& row : scores) {
    for (float v : row) data.push_back(v);
  }
  json out = {{"model_name", model_name}, {"model_version", kModelVersion}};
  if (!id.empty()) out["id"] = id;
  out["outputs"] = json::array({{{"name", kOutputName},
                                 {"datatype", "FP32"},
                                 {"shape", {static_cast<int64_t>(scores.size()), labels}},
                                 {"data", std::move(data)}}});
  return out.dump();
}

std::string server_metadata(std::string_view version, const std::vector<std::string>& extensions) {
  return json{{"name", "corepool"}, {"version", version}, {"extensions", extensions}}.dump();
}

std::string model_metadata(const ModelConfig& model) {
  std::vector<int64_t> in_shape{-1};
  for (int64_t d : model.item_shape()) in_shape.push_back(d);
  const std::vector<int64_t> out_shape{-1, static_cast<int64_t>(model.labels.size())};
  return json{{"name", model.name},
              {"versions", {kModelVersion}},
              {"platform", "pytorch_torchscript"},
              {"inputs", {{{"name", kInputName}, {"datatype", "FP32"}, {"shape", in_shape}}}},
              {"outputs", {{{"name", kOutputName}, {"datatype", "FP32"}, {"shape", out_shape}}}},
              {"parameters",
               {{"labels", model.labels},
                {"thresholds", model.thresholds},
                {"input_kind", model.input == InputKind::kLogMel ? "logmel" : "waveform"},
                {"sample_rate", model.sample_rate},
                {"max_batch", model.max_batch}}}}
      .dump();
}

namespace {

// The non-empty parts of `path` after `prefix`, or std::nullopt when it does
// not start with it, ends in '/' or has an empty part ("a//b").
std::optional<std::vector<std::string>> parts_after(std::string_view path, std::string_view prefix) {
  if (path.substr(0, prefix.size()) != prefix || path.size() == prefix.size() || path.back() == '/') {
    return std::nullopt;
  }
  std::vector<std::string> parts;
  std::string_view rest = path.substr(prefix.size());
  while (!rest.empty()) {
    const size_t slash = rest.find('/');
    parts.emplace_back(rest.substr(0, slash));
    if (parts.back().empty()) return std::nullopt;
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
  }
  return parts;
}

}  // namespace

std::optional<ModelPath> parse_model_path(std::string_view path) {
  const auto parts = parts_after(path, "/v2/models/");
  if (!parts || parts->empty()) return std::nullopt;
  ModelPath out;
  out.name = (*parts)[0];
  size_t next = 1;
  if (parts->size() >= 3 && (*parts)[1] == "versions") {
    out.version = (*parts)[2];
    next = 3;
  }
  if (parts->size() > next + 1) return std::nullopt;
  if (parts->size() == next + 1) out.action = (*parts)[next];
  static const char* kActions[] = {"", "ready", "infer", "config", "stats"};
  for (const char* a : kActions) {
    if (out.action == a) return out;
  }
  return std::nullopt;
}

std::optional<RepositoryPath> parse_repository_path(std::string_view path) {
  const auto parts = parts_after(path, "/v2/repository/models/");
  if (!parts || parts->size() != 2 || ((*parts)[1] != "load" && (*parts)[1] != "unload")) return std::nullopt;
  return RepositoryPath{(*parts)[0], (*parts)[1]};
}

}  // namespace corepool::oip
