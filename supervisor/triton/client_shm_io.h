// Tensors in client shared memory, both ends of an infer: the input read from
// a registered region straight into a request's items, and the scores written
// to one. Called by the triton::Service implementation for an InferInput with
// input_shm / output_shm, on any thread; whatever the wire, the errors name
// Triton's fields ("inputs[0].parameters.shared_memory_byte_size: ...").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "supervisor/triton/client_shm.h"
#include "supervisor/triton/inference_protocol.h"
#include "supervisor/triton/triton_service.h"

namespace corepool::triton {

// The whole input side: checks `header` against the model
// (oip::check_tensor_header), ref.byte_size == batch * item_floats * 4, and
// the region (registered, range inside it), then preads the bytes straight
// into the items' storage and rejects values that are not finite. `id` is
// the request's id, carried into the result. kPermissionDenied when client
// shm is disabled, kNotFound for an unregistered region, kInvalidArgument for
// everything else the client got wrong (a truncated region included).
Result<oip::InferRequest> read_shm_input(const ClientShmRegistry& registry, const oip::TensorHeader& header,
                                         const ShmRef& ref, const ModelConfig& model, int64_t max_batch,
                                         std::string id = {});

// Where a request's scores go: the region is held from admission, so an
// unregister while the request is queued does not lose the answer.
struct ShmOutput {
  std::shared_ptr<const ClientShmRegion> region;
  ShmRef ref;
  int64_t batch = 0;
  int64_t labels = 0;
};

// The output side, first half, before any inference: the region is
// registered and ref.byte_size == batch * labels * 4 fits inside it.
Result<ShmOutput> prepare_shm_output(const ClientShmRegistry& registry, const ShmRef& ref, int64_t batch,
                                     const ModelConfig& model);

// Second half: `scores` (batch x labels, as InferOutput holds them) as
// row-major little-endian FP32 at ref.offset, with pwrite. kInternal if
// `scores` is not batch x labels; kInvalidArgument if the client truncated
// the region meanwhile.
Status write_shm_output(const ShmOutput& output, const std::vector<std::vector<float>>& scores);

}  // namespace corepool::triton
