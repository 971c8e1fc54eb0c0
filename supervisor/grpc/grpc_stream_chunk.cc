// ModelStreamInfer's messages <-> StreamChunk and responses; see
// grpc_stream_chunk.h. Every check names the field it failed on.
#include "supervisor/grpc/grpc_stream_chunk.h"

#include <cstring>

#include "supervisor/triton/inference_protocol.h"

namespace corepool::grpc_api {
namespace {

using Parameters = google::protobuf::Map<std::string, inference::InferParameter>;

const inference::InferParameter* find(const Parameters& params, const char* key) {
  auto it = params.find(key);
  return it == params.end() ? nullptr : &it->second;
}

bool bool_param(const Parameters& params, const char* key) {
  const inference::InferParameter* p = find(params, key);
  if (!p) return false;
  if (p->parameter_choice_case() != inference::InferParameter::kBoolParam) {
    throw oip::ProtocolError(std::string("parameters.") + key + ": must be a bool_param");
  }
  return p->bool_param();
}

// sample_rate / channels as "&key=N"; "" when absent (parse_pcm_query then says what is missing).
std::string query_param(const Parameters& params, const char* key) {
  const inference::InferParameter* p = find(params, key);
  if (!p) return "";
  if (p->parameter_choice_case() == inference::InferParameter::kInt64Param) {
    return std::string("&") + key + "=" + std::to_string(p->int64_param());
  }
  if (p->parameter_choice_case() == inference::InferParameter::kUint64Param) {
    return std::string("&") + key + "=" + std::to_string(p->uint64_param());
  }
  throw oip::ProtocolError(std::string("parameters.") + key + ": must be an int64_param");
}

// parameters.sequence_id: a non-zero integer or a non-empty string, as Triton takes it.
std::string sequence_name(const Parameters& params) {
  const inference::InferParameter* p = find(params, "sequence_id");
  if (!p) throw oip::ProtocolError("parameters.sequence_id: missing; every request of a stream names its sequence");
  switch (p->parameter_choice_case()) {
    case inference::InferParameter::kInt64Param:
      if (p->int64_param() != 0) return std::to_string(p->int64_param());
      break;
    case inference::InferParameter::kUint64Param:
      if (p->uint64_param() != 0) return std::to_string(p->uint64_param());
      break;
    case inference::InferParameter::kStringParam:
      if (!p->string_param().empty()) return "\"" + p->string_param() + "\"";
      break;
    default:
      throw oip::ProtocolError("parameters.sequence_id: must be an int64_param, uint64_param or string_param");
  }
  throw oip::ProtocolError("parameters.sequence_id: 0 or \"\" is no sequence");
}

// The input's audio into chunk.pcm / datatype; format into pcm_query.
void read_audio(const inference::ModelInferRequest& request, StreamChunk& chunk) {
  if (request.inputs_size() == 0 && chunk.end && !chunk.start) return;  // an end with no audio
  if (request.inputs_size() != 1) {
    throw oip::ProtocolError("inputs: a stream's request has one input, \"" + std::string(kAudioInput) + "\"; got " +
                             std::to_string(request.inputs_size()));
  }
  const auto& input = request.inputs(0);
  if (input.name() != kAudioInput) {
    throw oip::ProtocolError("inputs[0].name: \"" + input.name() + "\"; a stream's input is \"" + kAudioInput + "\"");
  }
  size_t width = 0;
  if (input.datatype() == "INT16") width = 2, chunk.pcm_query += "&format=s16le";
  else if (input.datatype() == "FP32") width = 4, chunk.pcm_query += "&format=f32le";
  else throw oip::ProtocolError("inputs[0].datatype: \"" + input.datatype() + "\"; AUDIO is INT16 or FP32 PCM");
  chunk.datatype = input.datatype();
  if (request.raw_input_contents_size() != 1) {
    throw oip::ProtocolError("raw_input_contents: the audio goes there, as one entry (tritonclient's "
                             "set_data_from_numpy does so); got " + std::to_string(request.raw_input_contents_size()));
  }
  chunk.pcm = request.raw_input_contents(0);
  if (chunk.pcm.size() % width != 0) {
    throw oip::ProtocolError("raw_input_contents[0]: " + std::to_string(chunk.pcm.size()) + " bytes are not whole " +
                             chunk.datatype + " samples");
  }
  int64_t elements = 1;
  for (int64_t d : input.shape()) elements = d < 0 ? -1 : elements * d;
  if (input.shape_size() == 0 || elements != int64_t(chunk.pcm.size() / width)) {
    throw oip::ProtocolError("inputs[0].shape: " + std::to_string(elements) + " samples, but raw_input_contents[0] holds " +
                             std::to_string(chunk.pcm.size() / width));
  }
}

void set_bytes_output(inference::ModelInferResponse& response, const char* name, const std::string& text) {
  auto* out = response.add_outputs();
  out->set_name(name);
  out->set_datatype("BYTES");
  out->add_shape(1);
  // Triton's BYTES in raw contents: each element is its length (4 bytes, little-endian), then its bytes.
  std::string* raw = response.add_raw_output_contents();
  const uint32_t n = static_cast<uint32_t>(text.size());
  raw->resize(4 + text.size());
  std::memcpy(raw->data(), &n, 4);  // x86-64 and aarch64 are little-endian
  std::memcpy(raw->data() + 4, text.data(), text.size());
}

void name_sequence(inference::ModelInferResponse& response, const StreamChunk& chunk) {
  response.set_model_name(chunk.model);
  response.set_id(chunk.id);
  (*response.mutable_parameters())["sequence_id"] = chunk.sequence;
}

}  // namespace

StreamChunk to_stream_chunk(const inference::ModelInferRequest& request) {
  StreamChunk chunk;
  if (request.model_name().empty()) throw oip::ProtocolError("model_name: empty");
  chunk.model = request.model_name();
  chunk.id = request.id();
  const Parameters& params = request.parameters();
  chunk.sequence_name = sequence_name(params);
  chunk.sequence = params.at("sequence_id");
  chunk.start = bool_param(params, "sequence_start");
  chunk.end = bool_param(params, "sequence_end");
  chunk.pcm_query = query_param(params, "sample_rate") + query_param(params, "channels");
  read_audio(request, chunk);
  if (!chunk.pcm_query.empty()) chunk.pcm_query.erase(0, 1);  // the first '&'
  return chunk;
}

inference::ModelStreamInferResponse stream_response(const StreamChunk& chunk, const char* output, const std::string& json,
                                                    bool final) {
  inference::ModelStreamInferResponse r;
  inference::ModelInferResponse& response = *r.mutable_infer_response();
  name_sequence(response, chunk);
  (*response.mutable_parameters())["triton_final_response"].set_bool_param(final);
  set_bytes_output(response, output, json);
  return r;
}

inference::ModelStreamInferResponse stream_error(const StreamChunk* chunk, const std::string& message) {
  inference::ModelStreamInferResponse r;
  if (!chunk) {
    r.set_error_message(message);
    return r;
  }
  r.set_error_message("sequence " + chunk->sequence_name + ": " + message);
  name_sequence(*r.mutable_infer_response(), *chunk);
  return r;
}

std::string request_where(const inference::ModelInferRequest& request) {
  std::string w;
  try {
    w = "sequence " + sequence_name(request.parameters());
  } catch (const oip::ProtocolError&) {
  }
  if (!request.id().empty()) w += (w.empty() ? "" : ", ") + std::string("request \"") + request.id() + "\"";
  return w.empty() ? "" : w + ": ";
}

}  // namespace corepool::grpc_api
