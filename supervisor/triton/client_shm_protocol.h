// Triton's system shared memory extension over HTTP/JSON: the
// /v2/systemsharedmemory paths and register body, and the shared-memory
// parameters of a KServe v2 infer request. Pure functions, no sockets; the
// HTTP routes call them, then the triton::Service. Like inference_protocol.h
// they throw oip::ProtocolError naming the field
// ("inputs[0].parameters.shared_memory_byte_size: ...").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "supervisor/triton/inference_protocol.h"
#include "supervisor/triton/triton_service.h"

namespace corepool::oip {

enum class ShmAction { kStatus, kRegister, kUnregister };

// GET  /v2/systemsharedmemory/status                     {kStatus, ""}
// GET  /v2/systemsharedmemory/region/{name}/status       {kStatus, name}
// POST /v2/systemsharedmemory/region/{name}/register     {kRegister, name}
// POST /v2/systemsharedmemory/unregister                 {kUnregister, ""}
// POST /v2/systemsharedmemory/region/{name}/unregister   {kUnregister, name}
struct ShmPath {
  ShmAction action = ShmAction::kStatus;
  std::string region;  // percent-decoded (Triton's clients quote it); "" = every region
  const char* method() const { return action == ShmAction::kStatus ? "GET" : "POST"; }
};

// std::nullopt for any other path (a 404). Throws ProtocolError for a region
// name with a bad percent escape, a NUL, or bytes that are not UTF-8.
std::optional<ShmPath> parse_shm_path(std::string_view path);

// The register body: {"key": "/name", "offset": N?, "byte_size": N}.
struct ShmRegisterBody {
  std::string key;
  uint64_t offset = 0;  // optional in the body, 0 when absent
  uint64_t byte_size = 0;
};
ShmRegisterBody parse_shm_register_body(std::string_view body);

// The shared-memory parameters of an infer request, from its JSON (the whole
// body, or the first Inference-Header-Content-Length bytes of a binary one).
// Only those parameters are checked here; the tensor header against the
// model is checked by triton::read_shm_input.
struct InferShm {
  std::string id;
  std::optional<TensorHeader> input_header;      // set with input_shm
  std::optional<triton::ShmRef> input_shm;       // inputs[0] names a region and has no "data"
  std::optional<triton::ShmRef> output_shm;      // outputs[i] names a region for the scores
};
// An adapter calls it first, then fills its triton::InferInput:
//   InferShm shm = parse_infer_shm(json);
//   if (shm.input_shm) { in.tensor.id = shm.id; in.input_header = shm.input_header; in.input_shm = shm.input_shm; }
//   else in.tensor = parse_infer_request(body, ...);   // or parse_binary_infer_request
//   in.output_shm = shm.output_shm;
InferShm parse_infer_shm(std::string_view json);

}  // namespace corepool::oip
