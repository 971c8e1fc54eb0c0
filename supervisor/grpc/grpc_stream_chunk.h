// ModelStreamInfer's messages, one at a time: a request read as a chunk of
// one sequence (parameters sequence_id, sequence_start, sequence_end; input
// "AUDIO", INT16 or FP32 interleaved PCM in raw_input_contents; sample_rate
// and channels as parameters), and the responses written for a sequence (an
// event, its final response, an error). Pure functions, no sockets and no
// threads: grpc_stream.cc calls them on gRPC's threads, the unit tests directly.
#pragma once

#include <string>

#include "supervisor/grpc/proto/grpc_service.pb.h"

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

// "sequence 7, request \"a1\": ", as much of it as the request says; for an
// error in a request that is no chunk.
std::string request_where(const inference::ModelInferRequest& request);

// The response to one of `chunk`'s sequence: output `output` (BYTES [1])
// holding `json`, and triton_final_response.
inference::ModelStreamInferResponse stream_response(const StreamChunk& chunk, const char* output, const std::string& json,
                                                    bool final);
// A response saying what went wrong, naming the sequence when there is one.
inference::ModelStreamInferResponse stream_error(const StreamChunk* chunk, const std::string& message);

}  // namespace corepool::grpc_api
