// Triton's system shared memory extension as JSON and paths. Every check
// names the field it failed on, as inference_protocol.cc does.
#include "supervisor/triton/client_shm_protocol.h"

#include <nlohmann/json.hpp>

namespace corepool::oip {
namespace {

using json = nlohmann::json;

constexpr std::string_view kPrefix = "/v2/systemsharedmemory";
constexpr const char* kShmKeys[] = {"shared_memory_region", "shared_memory_byte_size", "shared_memory_offset"};

json parse_json(std::string_view text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw ProtocolError("the request body is not valid JSON");
  if (!doc.is_object()) throw ProtocolError("the request body must be a JSON object");
  return doc;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A path segment as the client meant it: Triton's clients percent-quote names.
std::string region_name(std::string_view segment) {
  std::string out;
  for (size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] != '%') {
      out += segment[i];
      continue;
    }
    const int hi = i + 2 < segment.size() ? hex_digit(segment[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_digit(segment[i + 2]) : -1;
    if (lo < 0) throw ProtocolError("region name in the path: bad percent escape at character " + std::to_string(i));
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  if (out.find('\0') != std::string::npos) throw ProtocolError("region name in the path: contains NUL");
  try {
    (void)json(out).dump();  // throws on bytes that are not UTF-8
  } catch (const json::type_error&) {
    throw ProtocolError("region name in the path: not UTF-8 once percent-decoded");
  }
  return out;
}

std::optional<ShmAction> action_of(std::string_view word) {
  if (word == "status") return ShmAction::kStatus;
  if (word == "register") return ShmAction::kRegister;
  if (word == "unregister") return ShmAction::kUnregister;
  return std::nullopt;
}

uint64_t byte_count(const json& value, const std::string& where) {
  if (!value.is_number_unsigned()) {
    throw ProtocolError(where + ": must be a byte count (an integer >= 0), got " + value.dump());
  }
  return value.get<uint64_t>();
}

bool names_shm(const json& object) {
  auto params = object.find("parameters");
  if (params == object.end() || !params->is_object()) return false;
  for (const char* key : kShmKeys) {
    if (params->contains(key)) return true;
  }
  return false;
}

// The parameters of an input or output that names a region; `where` is
// "inputs[0]" or "outputs[i]".
triton::ShmRef shm_ref(const json& object, const std::string& where) {
  const json& params = object.at("parameters");
  const std::string at = where + ".parameters.";
  triton::ShmRef ref;
  auto region = params.find("shared_memory_region");
  if (region == params.end()) throw ProtocolError(at + "shared_memory_region: missing");
  if (!region->is_string() || region->get<std::string>().empty()) {
    throw ProtocolError(at + "shared_memory_region: must be a non-empty string, got " + region->dump());
  }
  ref.region = region->get<std::string>();
  auto size = params.find("shared_memory_byte_size");
  if (size == params.end()) throw ProtocolError(at + "shared_memory_byte_size: missing");
  ref.byte_size = byte_count(*size, at + "shared_memory_byte_size");
  if (auto offset = params.find("shared_memory_offset"); offset != params.end()) {
    ref.offset = byte_count(*offset, at + "shared_memory_offset");
  }
  return ref;
}

// inputs[0] as a tensor header (name, datatype, shape): these are checked
// against the model later (check_tensor_header), only their types here.
TensorHeader input_header(const json& input) {
  auto string_member = [&](const char* key) {
    auto it = input.find(key);
    if (it == input.end()) throw ProtocolError(std::string("inputs[0].") + key + ": missing");
    if (!it->is_string()) throw ProtocolError(std::string("inputs[0].") + key + ": must be a string");
    return it->get<std::string>();
  };
  TensorHeader header;
  header.name = string_member("name");
  header.datatype = string_member("datatype");
  auto shape = input.find("shape");
  if (shape == input.end()) throw ProtocolError("inputs[0].shape: missing");
  if (!shape->is_array()) throw ProtocolError("inputs[0].shape: must be an array of integers");
  for (const json& d : *shape) {
    if (!d.is_number_integer()) throw ProtocolError("inputs[0].shape: must be an array of integers");
    header.shape.push_back(d.get<int64_t>());
  }
  return header;
}

void check_parameters_object(const json& object, const std::string& where) {
  auto params = object.find("parameters");
  if (params != object.end() && !params->is_object()) throw ProtocolError(where + ".parameters: must be an object");
}

void parse_input_shm(const json& req, InferShm& out) {
  auto inputs = req.find("inputs");
  if (inputs == req.end() || !inputs->is_array()) return;  // parse_infer_request says what is wrong
  for (size_t i = 0; i < inputs->size(); ++i) {
    const json& input = (*inputs)[i];
    if (!input.is_object()) continue;
    check_parameters_object(input, "inputs[" + std::to_string(i) + "]");
    if (!names_shm(input)) continue;
    if (inputs->size() != 1) {
      throw ProtocolError("inputs: the model takes exactly one input object, named \"" + std::string(kInputName) +
                          "\"");
    }
    if (input.contains("data")) {
      throw ProtocolError("inputs[0].data: an input in shared memory (parameters.shared_memory_region) has no data");
    }
    if (input.at("parameters").contains("binary_data_size")) {
      throw ProtocolError("inputs[0].parameters.binary_data_size: an input is either binary data or in shared "
                          "memory, not both");
    }
    out.input_header = input_header(input);
    out.input_shm = shm_ref(input, "inputs[0]");
  }
}

// The outputs: only "scores", at most one of them in a region. Checked here
// too because parse_infer_request, which also checks the names, is not
// called when the input is in shared memory.
void parse_output_shm(const json& req, InferShm& out) {
  auto outputs = req.find("outputs");
  if (outputs == req.end()) return;
  if (!outputs->is_array()) throw ProtocolError("outputs: must be an array");
  for (size_t i = 0; i < outputs->size(); ++i) {
    const json& o = (*outputs)[i];
    const std::string where = "outputs[" + std::to_string(i) + "]";
    auto name = o.is_object() ? o.find("name") : o.end();
    if (!o.is_object() || name == o.end() || !name->is_string() || name->get<std::string>() != kOutputName) {
      throw ProtocolError(where + ": the model has one output, named \"" + std::string(kOutputName) + "\"");
    }
    check_parameters_object(o, where);
    if (!names_shm(o)) continue;
    if (out.output_shm) {
      throw ProtocolError(where + ".parameters.shared_memory_region: \"" + std::string(kOutputName) +
                          "\" already goes to a region (an earlier output)");
    }
    out.output_shm = shm_ref(o, where);
  }
}

}  // namespace

std::optional<ShmPath> parse_shm_path(std::string_view path) {
  if (path.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::string_view rest = path.substr(kPrefix.size());
  if (rest == "/status") return ShmPath{ShmAction::kStatus, ""};
  if (rest == "/unregister") return ShmPath{ShmAction::kUnregister, ""};
  constexpr std::string_view kRegion = "/region/";
  if (rest.substr(0, kRegion.size()) != kRegion) return std::nullopt;
  rest = rest.substr(kRegion.size());
  const size_t slash = rest.find('/');
  if (slash == 0 || slash == std::string_view::npos) return std::nullopt;
  const std::optional<ShmAction> action = action_of(rest.substr(slash + 1));  // "x/y/status" is not an action
  if (!action) return std::nullopt;
  return ShmPath{*action, region_name(rest.substr(0, slash))};
}

ShmRegisterBody parse_shm_register_body(std::string_view body) {
  const json req = parse_json(body);
  ShmRegisterBody out;
  auto key = req.find("key");
  if (key == req.end()) throw ProtocolError("key: missing (the shared memory key, e.g. \"/my_region\")");
  if (!key->is_string()) throw ProtocolError("key: must be a string, got " + key->dump());
  out.key = key->get<std::string>();
  if (auto offset = req.find("offset"); offset != req.end()) out.offset = byte_count(*offset, "offset");
  auto size = req.find("byte_size");
  if (size == req.end()) throw ProtocolError("byte_size: missing");
  out.byte_size = byte_count(*size, "byte_size");
  return out;
}

InferShm parse_infer_shm(std::string_view text) {
  const json req = parse_json(text);
  InferShm out;
  if (auto id = req.find("id"); id != req.end()) {
    if (!id->is_string()) throw ProtocolError("id: must be a string");
    out.id = id->get<std::string>();
  }
  parse_input_shm(req, out);
  parse_output_shm(req, out);
  return out;
}

}  // namespace corepool::oip
