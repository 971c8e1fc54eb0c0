// The Open Inference Protocol (KServe v2 REST) as JSON: server and model
// metadata, and the infer request/response for corepool's one-input,
// one-output models. Pure functions over ModelConfig, no LibTorch and no
// sockets, so every malformed request is unit-tested here; serve_routes.cc
// calls them on the HTTP loop thread.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "config/model_config.h"

namespace corepool::oip {

constexpr const char* kInputName = "input";
constexpr const char* kOutputName = "scores";
constexpr const char* kModelVersion = "1";

// A request the protocol rejects: the message is the client's "error" text.
struct ProtocolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct InferRequest {
  std::string id;                   // echoed back when present
  int64_t batch = 0;                // items: the first dimension of the input's shape
  std::vector<std::vector<float>> items;  // batch x item_floats(), row-major
  uint64_t timeout_us = 0;          // the request's "parameters": {"timeout": us} (Triton's); 0 = none
};

// Parses and checks a JSON infer request against the model: exactly one input
// named "input" of datatype FP32 (FP64 and integer data are accepted and
// converted), shape [B, item_shape...] with 1 <= B <= max_batch, data flat or
// nested, every value a finite number, outputs (if asked) only "scores", and
// parameters.timeout (if any) a count of microseconds.
// Throws ProtocolError naming the field ("inputs[0].shape: ...").
InferRequest parse_infer_request(std::string_view body, const ModelConfig& model, int64_t max_batch);

// The same request in the binary tensor data extension (Triton's): the body is
// `json_bytes` of JSON header whose input carries "parameters":
// {"binary_data_size": N}, then N bytes of little-endian FP32 data.
InferRequest parse_binary_infer_request(std::string_view body, size_t json_bytes, const ModelConfig& model,
                                        int64_t max_batch);

// One input tensor's header as carriers other than a JSON body give it (gRPC,
// client shared memory): checked against the model like the JSON path.
struct TensorHeader {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;
};

// Checks name ("input"), datatype (FP32 only: these carriers hold raw bytes)
// and shape ([B, item_shape...], 1 <= B <= max_batch); returns B. Throws
// ProtocolError whose message starts with `where` ("inputs[0].shape: ...").
int64_t check_tensor_header(const TensorHeader& header, const ModelConfig& model, int64_t max_batch,
                            const std::string& where);

// `bytes` of little-endian FP32 (gRPC raw_input_contents, a shm region) as
// `batch` items; throws ProtocolError (naming `where`) on a size that does not
// match batch * item_floats() * 4 or a value that is not finite.
InferRequest items_from_fp32_bytes(std::string id, int64_t batch, std::string_view bytes, const ModelConfig& model,
                                   const std::string& where);

// {"model_name", "model_version", "id"?, "outputs": [{"name": "scores",
// "datatype": "FP32", "shape": [B, labels], "data": [...]}]}.
std::string infer_response(const ModelConfig& model, const std::string& id,
                           const std::vector<std::vector<float>>& scores);
// The same from the model's name and label count (a triton::InferOutput).
std::string infer_response(const std::string& model_name, const std::string& id,
                           const std::vector<std::vector<float>>& scores, int64_t labels);

// {"name": "corepool", "version", "extensions"}: the extensions that work.
std::string server_metadata(std::string_view version,
                            const std::vector<std::string>& extensions = {"binary_tensor_data"});
std::string model_metadata(const ModelConfig& model);

// "/v2/models/NAME/infer" -> {"NAME", "infer"}; "/v2/models/NAME" -> {"NAME", ""};
// "/v2/models/NAME/versions/V/ready" -> {"NAME", "ready", "V"}; std::nullopt for
// any other path (an unknown action included). The caller checks the version.
struct ModelPath {
  std::string name;
  std::string action;  // "", "ready", "infer", "config", "stats"
  std::string version;  // "" unless the path named one
};
std::optional<ModelPath> parse_model_path(std::string_view path);

// Triton's model repository extension: "/v2/repository/models/NAME/load" ->
// {"NAME", "load"} (or "unload"); std::nullopt for any other path.
struct RepositoryPath {
  std::string model;
  std::string action;  // "load" | "unload"
};
std::optional<RepositoryPath> parse_repository_path(std::string_view path);

}  // namespace corepool::oip
