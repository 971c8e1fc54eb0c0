// The RPCs; see grpc_service.h. Every answer goes through Answer (or, for
// ModelInfer, InferReactor), which counts it in /metrics (Service::observe,
// protocol "grpc", the gRPC status code) and turns an exception into INTERNAL
// instead of letting it reach gRPC's threads.
#include "supervisor/grpc/grpc_service.h"

#include <chrono>
#include <mutex>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "supervisor/grpc/grpc_infer.h"
#include "supervisor/grpc/grpc_stream.h"

namespace corepool::grpc_api {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

grpc::Status to_grpc(const triton::Status& s) {
  return s.ok() ? grpc::Status::OK : grpc::Status(status_code(s.code), s.message);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The Service's JSON (protobuf's JSON mapping of the same message) into `message`.
grpc::Status from_json(const std::string& text, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // a field this proto leaves out is one the client would not read either
  const auto status = google::protobuf::util::JsonStringToMessage(text, message, options);
  if (status.ok()) return grpc::Status::OK;
  spdlog::error("gRPC: cannot convert the service's answer to {}: {}", message->GetTypeName(), status.ToString());
  return grpc::Status(grpc::StatusCode::INTERNAL, "internal error converting the answer to " + message->GetTypeName());
}

// `in` as a `Req`; INVALID_ARGUMENT naming the message when it does not parse.
template <class Req>
grpc::Status parse(const grpc::ByteBuffer* in, Req& request) {
  grpc::ByteBuffer copy(*in);  // shares the slices; Deserialize consumes its argument
  const grpc::Status s = grpc::SerializationTraits<Req>::Deserialize(&copy, &request);
  if (s.ok()) return s;
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "malformed message: not a valid " + request.GetTypeName() + " (" + s.error_message() + ")");
}

grpc::Status serialize(const google::protobuf::Message& response, grpc::ByteBuffer* out) {
  bool own = false;
  return grpc::SerializationTraits<google::protobuf::Message>::Serialize(response, out, &own);
}

// One unary answer, given synchronously.
class Answer {
 public:
  Answer(triton::Service& service, grpc::CallbackServerContext* ctx, const char* endpoint)
      : service_(service), ctx_(ctx), endpoint_(endpoint) {}

  template <class Fn>
  grpc::ServerUnaryReactor* run(Fn&& fn) {
    grpc::Status status;
    try {
      status = fn();
    } catch (const std::exception& e) {
      spdlog::error("gRPC {}: {}", endpoint_, e.what());
      status = grpc::Status(grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what());
    }
    service_.observe("grpc", endpoint_, status.error_code(), seconds_since(t0_));
    auto* reactor = ctx_->DefaultReactor();
    reactor->Finish(std::move(status));
    return reactor;
  }

 private:
  triton::Service& service_;
  grpc::CallbackServerContext* ctx_;
  const char* endpoint_;
  const Clock::time_point t0_ = Clock::now();
};

// One ModelInfer in flight. gRPC calls OnCancel (client cancelled, hung up,
// or its deadline passed) on one of its threads; the Service calls on_done on
// one of its own. The mutex orders them: a cancel before the Service handed
// out its InferCall is applied as soon as it does. gRPC calls OnDone once
// Finish went out and after ModelInfer() returned, so the reactor outlives
// both; it holds the InferCall until then.
class InferReactor final : public grpc::ServerUnaryReactor {
 public:
  InferReactor(triton::Service& service, grpc::ByteBuffer* out, int64_t batch, Clock::time_point t0)
      : service_(service), out_(out), batch_(batch), t0_(t0) {}

  void set_call(std::shared_ptr<triton::InferCall> call) {
    bool cancel = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      call_ = call;
      cancel = cancelled_ && !answered_;
    }
    if (cancel) call->cancel();
  }

  void OnCancel() override {
    std::shared_ptr<triton::InferCall> call;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      if (!answered_) call = call_;
    }
    if (call) call->cancel();  // outside the lock: cancel() calls on_done with kCancelled
  }

  void on_done(const triton::Status& status, triton::InferOutput&& output) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      answered_ = true;
    }
    grpc::Status answer = to_grpc(status);
    if (status.ok()) {
      try {
        inference::ModelInferResponse response;
        fill_infer_response(output, batch_, response);
        answer = serialize(response, out_);
      } catch (const std::exception& e) {
        answer = grpc::Status(grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what());
      }
    }
    service_.observe("grpc", "infer", answer.error_code(), seconds_since(t0_));
    Finish(std::move(answer));
  }

  void OnDone() override { delete this; }

 private:
  triton::Service& service_;
  grpc::ByteBuffer* out_;  // gRPC's, valid until OnDone
  const int64_t batch_;
  const Clock::time_point t0_;
  std::mutex mu_;
  std::shared_ptr<triton::InferCall> call_;
  bool cancelled_ = false;
  bool answered_ = false;
};

// RepositoryModelLoad's parameters: "config" (a JSON object of [engine] keys) only.
triton::Result<std::string> load_config(const inference::RepositoryModelLoadRequest& request) {
  triton::Result<std::string> r;
  for (const auto& [key, value] : request.parameters()) {
    if (key != "config") {
      r.status = {triton::Code::kInvalidArgument, "parameters." + key + ": not supported (only \"config\")"};
      return r;
    }
    if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kStringParam) {
      r.status = {triton::Code::kInvalidArgument, "parameters.config: must be a string_param holding a JSON object"};
      return r;
    }
    r.value = value.string_param();
  }
  return r;
}

constexpr const char* kNoCuda = "CUDA shared memory: corepool runs on CPUs only; use system shared memory";

}  // namespace

grpc::StatusCode status_code(triton::Code code) {
  switch (code) {
    case triton::Code::kOk: return grpc::StatusCode::OK;
    case triton::Code::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case triton::Code::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case triton::Code::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    case triton::Code::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case triton::Code::kDeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case triton::Code::kCancelled: return grpc::StatusCode::CANCELLED;
    case triton::Code::kAlreadyExists: return grpc::StatusCode::ALREADY_EXISTS;
    case triton::Code::kPermissionDenied: return grpc::StatusCode::PERMISSION_DENIED;
    case triton::Code::kUnauthenticated: return grpc::StatusCode::UNAUTHENTICATED;
    case triton::Code::kInternal: return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::UNKNOWN;
}

using Reactor = grpc::ServerUnaryReactor;
using Context = grpc::CallbackServerContext;
using grpc::Status;

InferenceService::InferenceService(triton::Service& service, triton::Doors* doors, AudioStreams* streams,
                                   size_t stream_backlog)
    : service_(service), doors_(doors), streams_(streams), stream_backlog_(stream_backlog) {
  // Triton's method names, in grpc_service.proto's order.
  add("/inference.GRPCInferenceService/ServerLive", "live", &InferenceService::server_live);
  add("/inference.GRPCInferenceService/ServerReady", "ready", &InferenceService::server_ready);
  add("/inference.GRPCInferenceService/ModelReady", "model_ready", &InferenceService::model_ready);
  add("/inference.GRPCInferenceService/ServerMetadata", "server_metadata", &InferenceService::server_metadata);
  add("/inference.GRPCInferenceService/ModelMetadata", "model_metadata", &InferenceService::model_metadata);
  add_raw("/inference.GRPCInferenceService/ModelInfer",
          [this](Context* ctx, const grpc::ByteBuffer* in, grpc::ByteBuffer* out) { return model_infer(ctx, in, out); });
  // Bidirectional; like ModelInfer, open to every client (the doors guard model control only).
  AddMethod(new grpc::internal::RpcServiceMethod("/inference.GRPCInferenceService/ModelStreamInfer",
                                                 grpc::internal::RpcMethod::BIDI_STREAMING, nullptr));
  MarkMethodRawCallback(methods_++,
                        new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                            [this](Context*) { return start_stream_infer(service_, streams_, stream_backlog_); }));
  add("/inference.GRPCInferenceService/ModelConfig", "model_config", &InferenceService::model_config);
  add("/inference.GRPCInferenceService/ModelStatistics", "statistics", &InferenceService::model_statistics);
  add("/inference.GRPCInferenceService/RepositoryIndex", "repository_index", &InferenceService::repository_index);
  add_raw("/inference.GRPCInferenceService/RepositoryModelLoad",
          [this](Context* ctx, const grpc::ByteBuffer* in, grpc::ByteBuffer* out) { return repository_load(ctx, in, out); });
  add("/inference.GRPCInferenceService/RepositoryModelUnload", "repository_unload", &InferenceService::repository_unload,
      true);
  add("/inference.GRPCInferenceService/SystemSharedMemoryStatus", "shm_status", &InferenceService::shm_status);
  add("/inference.GRPCInferenceService/SystemSharedMemoryRegister", "shm_register", &InferenceService::shm_register,
      true);
  add("/inference.GRPCInferenceService/SystemSharedMemoryUnregister", "shm_unregister",
      &InferenceService::shm_unregister, true);
  add("/inference.GRPCInferenceService/CudaSharedMemoryStatus", "cuda_shm",
      &InferenceService::cuda_shm<inference::CudaSharedMemoryStatusRequest, inference::CudaSharedMemoryStatusResponse>);
  add("/inference.GRPCInferenceService/CudaSharedMemoryRegister", "cuda_shm",
      &InferenceService::cuda_shm<inference::CudaSharedMemoryRegisterRequest,
                                  inference::CudaSharedMemoryRegisterResponse>);
  add("/inference.GRPCInferenceService/CudaSharedMemoryUnregister", "cuda_shm",
      &InferenceService::cuda_shm<inference::CudaSharedMemoryUnregisterRequest,
                                  inference::CudaSharedMemoryUnregisterResponse>);
}

// What the generated WithRawCallbackMethod_* classes do, for a method of ours.
void InferenceService::add_raw(const char* method, RawHandler handler) {
  AddMethod(new grpc::internal::RpcServiceMethod(method, grpc::internal::RpcMethod::NORMAL_RPC, nullptr));
  MarkMethodRawCallback(methods_++, new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                                        std::move(handler)));
}

Status InferenceService::door(Context* ctx) {
  if (!doors_) return Status::OK;
  std::optional<std::string_view> authorization;
  const auto& metadata = ctx->client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = std::string_view(it->second.data(), it->second.size());
  }
  return to_grpc(doors_->check(authorization));
}

template <class Req, class Resp>
void InferenceService::add(const char* method, const char* endpoint, Handler<Req, Resp> handler, bool guarded) {
  add_raw(method, [this, endpoint, handler, guarded](Context* ctx, const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {
    return Answer(service_, ctx, endpoint).run([&] {
      if (guarded) {
        if (Status s = door(ctx); !s.ok()) return s;
      }
      Req request;
      Status s = parse(in, request);
      if (!s.ok()) return s;
      Resp response;
      s = (this->*handler)(request, response);
      return s.ok() ? serialize(response, out) : s;
    });
  });
}

Reactor* InferenceService::model_infer(Context* ctx, const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {
  const Clock::time_point t0 = Clock::now();
  inference::ModelInferRequest request;
  triton::InferInput input;
  Status refused = parse(in, request);
  try {
    if (refused.ok() && request.model_name().empty()) throw oip::ProtocolError("model_name: empty");
    if (refused.ok()) {
      const auto view = service_.model_view(request.model_name(), request.model_version());
      if (!view.status.ok()) {
        refused = to_grpc(view.status);
      } else {
        input = to_infer_input(request, view.value);
        input.deadline = steady_deadline(ctx->deadline());
      }
    }
  } catch (const oip::ProtocolError& e) {
    refused = Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
  }
  if (!refused.ok()) return Answer(service_, ctx, "infer").run([&] { return refused; });
  auto* reactor = new InferReactor(service_, out, input.tensor.batch, t0);
  auto call = service_.infer(std::move(input), [reactor](triton::Status status, triton::InferOutput&& output) {
    reactor->on_done(status, std::move(output));
  });
  if (call) reactor->set_call(std::move(call));
  return reactor;
}

Reactor* InferenceService::repository_load(Context* ctx, const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {
  const Clock::time_point t0 = Clock::now();
  inference::RepositoryModelLoadRequest request;
  Status refused = door(ctx);
  if (refused.ok()) refused = parse(in, request);
  triton::Result<std::string> config;
  if (refused.ok()) {
    config = load_config(request);
    refused = to_grpc(config.status);
  }
  if (refused.ok()) refused = serialize(inference::RepositoryModelLoadResponse(), out);  // empty either way
  if (!refused.ok()) return Answer(service_, ctx, "repository_load").run([&] { return refused; });
  auto* reactor = ctx->DefaultReactor();
  // The reload ends on the server's main thread; DefaultReactor may finish from any thread.
  service_.load(request.model_name(), config.value, [this, reactor, t0](triton::Status status) {
    const Status answer = to_grpc(status);
    service_.observe("grpc", "repository_load", answer.error_code(), seconds_since(t0));
    reactor->Finish(answer);
  });
  return reactor;
}

Status InferenceService::server_live(const inference::ServerLiveRequest&, inference::ServerLiveResponse& response) {
  response.set_live(service_.live());
  return Status::OK;
}

Status InferenceService::server_ready(const inference::ServerReadyRequest&, inference::ServerReadyResponse& response) {
  response.set_ready(service_.server_ready());
  return Status::OK;
}

Status InferenceService::model_ready(const inference::ModelReadyRequest& request,
                                     inference::ModelReadyResponse& response) {
  const triton::Status s = service_.model_ready(request.name(), request.version());
  // Not ready (unloaded, starting) is an answer, not an error; an unknown model is.
  if (s.code != triton::Code::kUnavailable && !s.ok()) return to_grpc(s);
  response.set_ready(s.ok());
  return Status::OK;
}

Status InferenceService::server_metadata(const inference::ServerMetadataRequest&,
                                         inference::ServerMetadataResponse& response) {
  return from_json(service_.server_metadata_json(), &response);
}

Status InferenceService::model_metadata(const inference::ModelMetadataRequest& request,
                                        inference::ModelMetadataResponse& response) {
  const auto r = service_.model_metadata_json(request.name(), request.version());
  return r.status.ok() ? from_json(r.value, &response) : to_grpc(r.status);
}

Status InferenceService::model_config(const inference::ModelConfigRequest& request,
                                      inference::ModelConfigResponse& response) {
  const auto r = service_.model_config_json(request.name(), request.version());
  return r.status.ok() ? from_json(r.value, response.mutable_config()) : to_grpc(r.status);
}

Status InferenceService::model_statistics(const inference::ModelStatisticsRequest& request,
                                          inference::ModelStatisticsResponse& response) {
  const auto r = service_.statistics_json(request.name(), request.version());
  return r.status.ok() ? from_json(r.value, &response) : to_grpc(r.status);
}

Status InferenceService::repository_index(const inference::RepositoryIndexRequest& request,
                                          inference::RepositoryIndexResponse& response) {
  // HTTP's form is the bare array; the message wraps it.
  const json models = json::parse(service_.repository_index_json(request.ready()));
  return from_json(json{{"models", models}}.dump(), &response);
}

Status InferenceService::repository_unload(const inference::RepositoryModelUnloadRequest& request,
                                           inference::RepositoryModelUnloadResponse&) {
  return to_grpc(service_.unload(request.model_name()));
}

Status InferenceService::shm_status(const inference::SystemSharedMemoryStatusRequest& request,
                                    inference::SystemSharedMemoryStatusResponse& response) {
  const auto r = service_.shm_status_json(request.name());
  if (!r.status.ok()) return to_grpc(r.status);
  json regions = json::object();  // HTTP's form is an array; the message is a map by name
  for (const json& region : json::parse(r.value)) regions[region.at("name").get<std::string>()] = region;
  return from_json(json{{"regions", regions}}.dump(), &response);
}

Status InferenceService::shm_register(const inference::SystemSharedMemoryRegisterRequest& request,
                                      inference::SystemSharedMemoryRegisterResponse&) {
  return to_grpc(service_.shm_register(request.name(), request.key(), request.offset(), request.byte_size()));
}

Status InferenceService::shm_unregister(const inference::SystemSharedMemoryUnregisterRequest& request,
                                        inference::SystemSharedMemoryUnregisterResponse&) {
  return to_grpc(service_.shm_unregister(request.name()));
}

template <class Req, class Resp>
Status InferenceService::cuda_shm(const Req&, Resp&) {
  return Status(grpc::StatusCode::UNIMPLEMENTED, kNoCuda);
}

}  // namespace corepool::grpc_api
