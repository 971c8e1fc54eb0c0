// Triton's ModelStreamInfer (bidirectional) as serve's audio streams: each
// request is a chunk of one sequence (parameters sequence_id, sequence_start,
// sequence_end; input "AUDIO", INT16 or FP32 PCM, interleaved; sample_rate
// and channels as parameters of the sequence_start request), and each
// sequence is one AudioStream, so one gRPC stream may carry several.
// Responses are decoupled: one per event as it closes (output "EVENT",
// BYTES [1], the event's JSON), then a final one (output "SUMMARY",
// parameter triton_final_response = true); a chunk or sequence that cannot
// be served gets a response with error_message and the call goes on.
// The pure translation (to_stream_chunk, *_response) is here for the unit
// tests; the reactor is made by InferenceService for each call.
#pragma once

#include <string>

#include <grpcpp/grpcpp.h>

#include "supervisor/grpc/proto/grpc_service.pb.h"
#include "supervisor/triton/audio_streams.h"
#include "supervisor/triton/triton_service.h"

namespace corepool::grpc_api {

constexpr const char* kAudioInput = "AUDIO";
constexpr const char* kEventOutput = "EVENT";
constexpr const char* kSummaryOutput = "SUMMARY";

// One request of a stream, checked.
struct StreamChunk {
  std::string model;
  std::string id;                       // the request's id, echoed in its sequence's responses
  inference::InferParameter sequence;   // parameters.sequence_id as the client gave it (int64, uint64 or string)
  std::string sequence_name;            // the same as text, for messages and the sequences' table
  bool start = false;
  bool end = false;
  std::string pcm_query;  // parse_pcm_query's form of sample_rate, channels and the datatype
  std::string datatype;   // "INT16", "FP32", or "" when the request has no input (an end alone)
  std::string pcm;        // the audio, interleaved little-endian
};

// Throws oip::ProtocolError naming the field ("parameters.sequence_id: ...").
StreamChunk to_stream_chunk(const inference::ModelInferRequest& request);

// The response to one of `chunk`'s sequence: output `output` (BYTES [1])
// holding `json`, and triton_final_response.
inference::ModelStreamInferResponse stream_response(const StreamChunk& chunk, const char* output, const std::string& json,
                                                    bool final);
// A response saying what went wrong, naming the sequence when there is one.
inference::ModelStreamInferResponse stream_error(const StreamChunk* chunk, const std::string& message);

// The reactor of one ModelStreamInfer call; deletes itself once gRPC is done with it.
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* start_stream_infer(triton::Service& service,
                                                                                 AudioStreams* streams);

}  // namespace corepool::grpc_api
