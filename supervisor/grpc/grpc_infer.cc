// ModelInfer translation; see grpc_infer.h. Every check names the field it
// failed on, as the HTTP path's do, so a client can fix its request from the
// INVALID_ARGUMENT message alone.
#include "supervisor/grpc/grpc_infer.h"

#include <cstring>

namespace corepool::grpc_api {
namespace {

using Parameters = google::protobuf::Map<std::string, inference::InferParameter>;

constexpr const char* kRegion = "shared_memory_region";
constexpr const char* kOffset = "shared_memory_offset";
constexpr const char* kByteSize = "shared_memory_byte_size";

uint64_t unsigned_param(const inference::InferParameter& p, const std::string& where) {
  if (p.parameter_choice_case() == inference::InferParameter::kInt64Param && p.int64_param() >= 0) {
    return static_cast<uint64_t>(p.int64_param());
  }
  if (p.parameter_choice_case() == inference::InferParameter::kUint64Param) return p.uint64_param();
  throw oip::ProtocolError(where + ": must be a non-negative int64_param");
}

// parameters.shared_memory_* -> a ShmRef; nullopt when no region is named.
std::optional<triton::ShmRef> shm_ref(const Parameters& params, const std::string& where) {
  auto region = params.find(kRegion);
  if (region == params.end()) {
    for (const char* key : {kOffset, kByteSize}) {
      if (params.count(key)) throw oip::ProtocolError(where + ".parameters." + key + ": given without " + kRegion);
    }
    return std::nullopt;
  }
  if (region->second.parameter_choice_case() != inference::InferParameter::kStringParam ||
      region->second.string_param().empty()) {
    throw oip::ProtocolError(where + ".parameters." + kRegion + ": must be a non-empty string_param");
  }
  triton::ShmRef ref;
  ref.region = region->second.string_param();
  auto size = params.find(kByteSize);
  if (size == params.end()) throw oip::ProtocolError(where + ".parameters: " + kRegion + " needs " + kByteSize);
  ref.byte_size = unsigned_param(size->second, where + ".parameters." + kByteSize);
  if (auto offset = params.find(kOffset); offset != params.end()) {
    ref.offset = unsigned_param(offset->second, where + ".parameters." + kOffset);
  }
  return ref;
}

oip::TensorHeader header_of(const inference::ModelInferRequest::InferInputTensor& input) {
  oip::TensorHeader h;
  h.name = input.name();
  h.datatype = input.datatype();
  h.shape.assign(input.shape().begin(), input.shape().end());
  return h;
}

// Which of InferTensorContents' typed lists carry data (fp32_contents is the only one accepted).
std::string typed_contents_other_than_fp32(const inference::InferTensorContents& c) {
  if (c.bool_contents_size()) return "bool_contents";
  if (c.int_contents_size()) return "int_contents";
  if (c.int64_contents_size()) return "int64_contents";
  if (c.uint_contents_size()) return "uint_contents";
  if (c.uint64_contents_size()) return "uint64_contents";
  if (c.fp64_contents_size()) return "fp64_contents";
  if (c.bytes_contents_size()) return "bytes_contents";
  return {};
}

// The requested outputs: only "scores"; its parameters may name a region.
std::optional<triton::ShmRef> requested_output(const inference::ModelInferRequest& request) {
  if (request.outputs_size() > 1) {
    throw oip::ProtocolError("outputs: the model has one output, \"" + std::string(oip::kOutputName) + "\"; " +
                             std::to_string(request.outputs_size()) + " requested");
  }
  if (request.outputs_size() == 0) return std::nullopt;
  const auto& out = request.outputs(0);
  if (out.name() != oip::kOutputName) {
    throw oip::ProtocolError("outputs[0].name: the model's output is named \"" + std::string(oip::kOutputName) +
                             "\", got \"" + out.name() + "\"");
  }
  return shm_ref(out.parameters(), "outputs[0]");
}

}  // namespace

triton::InferInput to_infer_input(const inference::ModelInferRequest& request, const triton::Service::ModelView& view) {
  triton::InferInput in;
  in.model = request.model_name();
  in.version = request.model_version();
  in.protocol = "grpc";
  if (request.inputs_size() != 1) {
    throw oip::ProtocolError("inputs: the model takes exactly one input, \"" + std::string(oip::kInputName) + "\"; got " +
                             std::to_string(request.inputs_size()));
  }
  const auto& input = request.inputs(0);
  in.output_shm = requested_output(request);
  oip::TensorHeader header = header_of(input);
  const int64_t batch = oip::check_tensor_header(header, view.config, view.max_batch, "inputs[0]");
  if (auto ref = shm_ref(input.parameters(), "inputs[0]")) {
    if (request.raw_input_contents_size() > 0 || input.has_contents()) {
      throw oip::ProtocolError("inputs[0]: data given both in shared memory and in the message");
    }
    in.tensor.id = request.id();
    in.tensor.batch = batch;
    in.input_header = std::move(header);
    in.input_shm = std::move(ref);
    return in;
  }
  if (request.raw_input_contents_size() > 1) {
    throw oip::ProtocolError("raw_input_contents: " + std::to_string(request.raw_input_contents_size()) +
                             " entries for one input");
  }
  if (request.raw_input_contents_size() == 1) {
    if (input.has_contents()) {
      throw oip::ProtocolError("inputs[0].contents: must be empty when raw_input_contents is used");
    }
    in.tensor = oip::items_from_fp32_bytes(request.id(), batch, request.raw_input_contents(0), view.config,
                                           "raw_input_contents[0]");
    return in;
  }
  if (std::string other = typed_contents_other_than_fp32(input.contents()); !other.empty()) {
    throw oip::ProtocolError("inputs[0].contents." + other + ": the input is FP32; use fp32_contents");
  }
  const auto& floats = input.contents().fp32_contents();
  if (floats.empty()) {
    throw oip::ProtocolError("inputs[0]: no data (raw_input_contents, contents.fp32_contents or a shared memory region)");
  }
  const std::string_view bytes(reinterpret_cast<const char*>(floats.data()), floats.size() * sizeof(float));
  in.tensor = oip::items_from_fp32_bytes(request.id(), batch, bytes, view.config, "inputs[0].contents.fp32_contents");
  return in;
}

std::optional<std::chrono::steady_clock::time_point> steady_deadline(std::chrono::system_clock::time_point deadline) {
  // gRPC reports "no deadline" as a time point decades away; anything past a day is taken as none.
  const auto now = std::chrono::system_clock::now();
  if (deadline - now > std::chrono::hours(24)) return std::nullopt;
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(deadline - now);
}

void fill_infer_response(const triton::InferOutput& output, int64_t batch, inference::ModelInferResponse& response) {
  response.set_model_name(output.model);
  response.set_model_version(output.version);
  response.set_id(output.id);
  auto* out = response.add_outputs();
  out->set_name(oip::kOutputName);
  out->set_datatype("FP32");
  out->add_shape(output.output_shm ? batch : static_cast<int64_t>(output.scores.size()));
  out->add_shape(output.labels);
  if (output.output_shm) {
    auto& params = *out->mutable_parameters();
    params[kRegion].set_string_param(output.output_shm->region);
    params[kOffset].set_int64_param(static_cast<int64_t>(output.output_shm->offset));
    params[kByteSize].set_int64_param(static_cast<int64_t>(output.output_shm->byte_size));
    return;
  }
  size_t floats = 0;
  for (const auto& row : output.scores) floats += row.size();
  std::string* raw = response.add_raw_output_contents();
  raw->resize(floats * sizeof(float));
  char* at = raw->data();
  for (const auto& row : output.scores) {
    std::memcpy(at, row.data(), row.size() * sizeof(float));  // x86-64 and aarch64 are little-endian
    at += row.size() * sizeof(float);
  }
}

}  // namespace corepool::grpc_api
