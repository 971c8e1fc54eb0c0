// ModelInfer's messages <-> triton::Service's InferInput / InferOutput: the
// one place that reads a ModelInferRequest (raw_input_contents or typed
// fp32_contents, shared-memory parameters, requested outputs) and writes a
// ModelInferResponse (raw_output_contents). Pure functions, no sockets and no
// threads: grpc_service.cc calls them on gRPC's threads, the unit tests directly.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "supervisor/grpc/proto/grpc_service.pb.h"
#include "supervisor/triton/triton_service.h"

namespace corepool::grpc_api {

// The request as the Service takes it, checked against the model (`view`:
// config and the batch bound of the moment). Throws oip::ProtocolError naming
// the field ("inputs[0].shape: ...") for anything the client must fix.
triton::InferInput to_infer_input(const inference::ModelInferRequest& request, const triton::Service::ModelView& view);

// The client's deadline as the Service's clock sees it; nullopt for none
// (gRPC's "infinite future").
std::optional<std::chrono::steady_clock::time_point> steady_deadline(std::chrono::system_clock::time_point deadline);

// Fills `response` from the answer: one output "scores", FP32, shape [B, labels],
// its data in raw_output_contents[0], or, when the scores went to a client
// shared-memory region, that region in the output's parameters and no data
// (`batch` is then the request's B, which the scores no longer show).
void fill_infer_response(const triton::InferOutput& output, int64_t batch, inference::ModelInferResponse& response);

}  // namespace corepool::grpc_api
