// Triton's ModelStreamInfer (bidirectional) as serve's audio streams: each
// request is a chunk of one sequence (parameters sequence_id, sequence_start,
// sequence_end; input "AUDIO", INT16 or FP32 PCM, interleaved; sample_rate
// and channels as parameters of the sequence_start request), and each
// sequence is one AudioStream, so one gRPC stream may carry several.
// Responses are decoupled: one per event as it closes (output "EVENT",
// BYTES [1], the event's JSON), then a final one (output "SUMMARY",
// parameter triton_final_response = true); a chunk or sequence that cannot
// be served gets a response with error_message and the call goes on.
// The messages are read and written by grpc_stream_chunk.h; the reactor
// here is made by InferenceService for each call.
#pragma once


#include <grpcpp/grpcpp.h>

#include "supervisor/triton/audio_streams.h"
#include "supervisor/triton/triton_service.h"

namespace corepool::grpc_api {

// The reactor of one ModelStreamInfer call; it lives until gRPC is done with
// it and the last of its sequences has let it go. At most `backlog` responses
// wait for a client that does not read; past that, events are dropped.
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* start_stream_infer(triton::Service& service,
                                                                                 AudioStreams* streams, size_t backlog);

}  // namespace corepool::grpc_api
