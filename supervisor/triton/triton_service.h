// What `corepool serve` answers, whatever the wire: the KServe v2 / Triton
// calls as one protocol-neutral interface. The HTTP routes (serve_routes.cc)
// and the gRPC service (supervisor/grpc/) are thin adapters over it, so both
// protocols share one admission path, one set of statistics, one shared-memory
// registry and one reload path, and give the same answers.
//
// Threading: every call may come from any thread (the HTTP loop, gRPC's
// threads) and never blocks on inference or on a reload: slow work completes
// through a callback, on some other thread.
//
// JSON: the *_json calls return the JSON form Triton's HTTP API uses, which is
// also protobuf's JSON mapping of the same gRPC messages (original field names,
// enums by name, uint64 as numbers), so the gRPC side can turn them into its
// messages with google::protobuf::util::JsonStringToMessage.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "supervisor/triton/inference_protocol.h"

namespace corepool::triton {

// Triton's error kinds. HTTP: http_status(); gRPC: the grpc::StatusCode of the same name.
enum class Code {
  kOk,
  kInvalidArgument,    // 400 / INVALID_ARGUMENT: the request is wrong (names the field)
  kNotFound,           // 404 / NOT_FOUND: unknown model, version or shm region
  kUnavailable,        // 503 / UNAVAILABLE: model unloaded or not ready, server draining
  kResourceExhausted,  // 503 + Retry-After / RESOURCE_EXHAUSTED: the queue is full, message too big
  kDeadlineExceeded,   // 504 / DEADLINE_EXCEEDED: no answer within the deadline
  kCancelled,          // (no answer: the client is gone) / CANCELLED
  kAlreadyExists,      // 400 / ALREADY_EXISTS: a shm region of that name is registered
  kPermissionDenied,   // 403 / PERMISSION_DENIED: client shm disabled, or a region of another user, model control off
  kUnauthenticated,    // 401 / UNAUTHENTICATED: serve.api_token set, and no or a wrong Bearer token
  kInternal,           // 500 / INTERNAL: the model failed on this input
};

struct Status {
  Code code = Code::kOk;
  std::string message;  // for the client: what and where ("inputs[0].shape: ...")
  bool ok() const { return code == Code::kOk; }
};

template <class T>
struct Result {
  Status status;
  T value{};  // meaningful only when status.ok()
};

int http_status(Code code);

// Where a tensor lives in a registered client shared-memory region (Triton's
// parameters shared_memory_region / shared_memory_offset / shared_memory_byte_size).
struct ShmRef {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

// One infer request, parsed by the adapter. The input is either already in
// `tensor` (JSON data, binary extension, gRPC contents) or named by
// `input_shm`, in which case the service reads it (pread, never a mapping a
// client could truncate under us) after checking `input_header` against the model.
struct InferInput {
  std::string model;
  std::string version;             // "" = the model's only version
  std::string protocol;            // "http" | "grpc": for statistics and /metrics
  oip::InferRequest tensor;        // id, batch and items, unless input_shm is set
  std::optional<oip::TensorHeader> input_header;  // with input_shm: name, datatype, shape
  std::optional<ShmRef> input_shm;
  std::optional<ShmRef> output_shm;  // the scores are written there (pwrite), not returned
  // No answer by then: kDeadlineExceeded, queued segments dropped. Default:
  // serve.request_timeout_s from now; a client deadline may only shorten it.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

struct InferOutput {
  std::string model;
  std::string version;
  std::string id;
  int64_t batch = 0;                      // the output's first dimension
  int64_t labels = 0;                     // the output's second dimension
  std::vector<std::vector<float>> scores;  // batch x labels; empty when written to output_shm
  std::optional<ShmRef> output_shm;       // echoed when the scores went there
};

// Called exactly once per infer(), on any thread, possibly before infer() returns.
using InferDone = std::function<void(Status, InferOutput&&)>;

// A request in flight. cancel() (the client hung up, or a gRPC call was
// cancelled) drops its queued segments at once, as the deadline does, counts
// it, and then calls done with kCancelled unless it was already answered.
class InferCall {
 public:
  virtual ~InferCall() = default;
  virtual void cancel() = 0;
};

class Service {
 public:
  virtual ~Service() = default;

  virtual bool live() = 0;
  virtual bool server_ready() = 0;
  // kOk when ready; kNotFound for an unknown model/version; kUnavailable when unloaded or starting.
  virtual Status model_ready(const std::string& model, const std::string& version) = 0;

  // {"name","version","extensions":[...]}: only the extensions that work
  // (system_shared_memory only with serve.allow_client_shm).
  virtual std::string server_metadata_json() = 0;
  virtual Result<std::string> model_metadata_json(const std::string& model, const std::string& version) = 0;
  // Triton's ModelConfig (model_config.proto as JSON).
  virtual Result<std::string> model_config_json(const std::string& model, const std::string& version) = 0;
  // Triton's ModelStatisticsResponse {"model_stats":[...]}; model "" = every model.
  virtual Result<std::string> statistics_json(const std::string& model, const std::string& version) = 0;

  // Triton's RepositoryIndexResponse as JSON: [{"name","version","state","reason"}]
  // (the HTTP form is the bare array; gRPC wraps it as {"models": [...]}).
  virtual std::string repository_index_json(bool ready_only) = 0;
  // Reloads the model from disk as a new generation, the same path as SIGHUP;
  // `config_json` ("" = none) is parameters.config: a JSON object of [engine]
  // keys that may change on reload. done(kOk) once the new generation serves.
  virtual void load(const std::string& model, const std::string& config_json, std::function<void(Status)> done) = 0;
  // The model stops serving (ready false, infer kUnavailable) until loaded again.
  virtual Status unload(const std::string& model) = 0;

  // Triton's system shared memory extension; kPermissionDenied unless serve.allow_client_shm.
  virtual Status shm_register(const std::string& name, const std::string& key, uint64_t offset,
                              uint64_t byte_size) = 0;
  virtual Status shm_unregister(const std::string& name) = 0;  // "" = every region
  // [{"name","key","offset","byte_size"}] ("" = every region); the gRPC form is a map by name.
  virtual Result<std::string> shm_status_json(const std::string& name) = 0;

  // The model's config and the batch bound a request may use right now, for
  // an adapter parsing a request (oip::parse_* and oip::check_tensor_header).
  struct ModelView {
    ModelConfig config;
    int64_t max_batch = 0;
  };
  virtual Result<ModelView> model_view(const std::string& model, const std::string& version) = 0;

  virtual std::shared_ptr<InferCall> infer(InferInput&& input, InferDone done) = 0;

  // One answered request, for /metrics' per-protocol counters and latency.
  virtual void observe(const std::string& protocol, const std::string& endpoint, int code, double seconds) = 0;
};

}  // namespace corepool::triton
