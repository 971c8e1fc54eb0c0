// The RPCs; see grpc_service.h. Every answer goes through Answer, which
// counts it in /metrics (Service::observe, protocol "grpc", the gRPC status
// code) and turns an exception into INTERNAL instead of letting it reach
// gRPC's threads.
#include "supervisor/grpc/grpc_service.h"

#include <chrono>
#include <mutex>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "supervisor/grpc/grpc_infer.h"

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
  InferReactor(triton::Service& service, inference::ModelInferResponse* response, int64_t batch, Clock::time_point t0)
      : service_(service), response_(response), batch_(batch), t0_(t0) {}

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
        fill_infer_response(output, batch_, *response_);
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
  inference::ModelInferResponse* response_;
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
    case triton::Code::kInternal: return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::UNKNOWN;
}

using Reactor = grpc::ServerUnaryReactor;
using Context = grpc::CallbackServerContext;

Reactor* InferenceService::ServerLive(Context* ctx, const inference::ServerLiveRequest*,
                                      inference::ServerLiveResponse* response) {
  return Answer(service_, ctx, "live").run([&] {
    response->set_live(service_.live());
    return grpc::Status::OK;
  });
}

Reactor* InferenceService::ServerReady(Context* ctx, const inference::ServerReadyRequest*,
                                       inference::ServerReadyResponse* response) {
  return Answer(service_, ctx, "ready").run([&] {
    response->set_ready(service_.server_ready());
    return grpc::Status::OK;
  });
}

Reactor* InferenceService::ModelReady(Context* ctx, const inference::ModelReadyRequest* request,
                                      inference::ModelReadyResponse* response) {
  return Answer(service_, ctx, "model_ready").run([&] {
    const triton::Status s = service_.model_ready(request->name(), request->version());
    // Not ready (unloaded, starting) is an answer, not an error; an unknown model is.
    if (s.code == triton::Code::kUnavailable || s.ok()) {
      response->set_ready(s.ok());
      return grpc::Status::OK;
    }
    return to_grpc(s);
  });
}

Reactor* InferenceService::ServerMetadata(Context* ctx, const inference::ServerMetadataRequest*,
                                          inference::ServerMetadataResponse* response) {
  return Answer(service_, ctx, "server_metadata").run([&] {
    return from_json(service_.server_metadata_json(), response);
  });
}

Reactor* InferenceService::ModelMetadata(Context* ctx, const inference::ModelMetadataRequest* request,
                                         inference::ModelMetadataResponse* response) {
  return Answer(service_, ctx, "model_metadata").run([&] {
    const auto r = service_.model_metadata_json(request->name(), request->version());
    return r.status.ok() ? from_json(r.value, response) : to_grpc(r.status);
  });
}

Reactor* InferenceService::ModelInfer(Context* ctx, const inference::ModelInferRequest* request,
                                      inference::ModelInferResponse* response) {
  const Clock::time_point t0 = Clock::now();
  triton::InferInput input;
  grpc::Status refused;
  try {
    if (request->model_name().empty()) throw oip::ProtocolError("model_name: empty");
    const auto view = service_.model_view(request->model_name(), request->model_version());
    if (!view.status.ok()) {
      refused = to_grpc(view.status);
    } else {
      input = to_infer_input(*request, view.value);
      input.deadline = steady_deadline(ctx->deadline());
    }
  } catch (const oip::ProtocolError& e) {
    refused = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
  }
  if (!refused.ok()) return Answer(service_, ctx, "infer").run([&] { return refused; });
  auto* reactor = new InferReactor(service_, response, input.tensor.batch, t0);
  auto call = service_.infer(std::move(input), [reactor](triton::Status status, triton::InferOutput&& output) {
    reactor->on_done(status, std::move(output));
  });
  if (call) reactor->set_call(std::move(call));
  return reactor;
}

Reactor* InferenceService::ModelConfig(Context* ctx, const inference::ModelConfigRequest* request,
                                       inference::ModelConfigResponse* response) {
  return Answer(service_, ctx, "model_config").run([&] {
    const auto r = service_.model_config_json(request->name(), request->version());
    return r.status.ok() ? from_json(r.value, response->mutable_config()) : to_grpc(r.status);
  });
}

Reactor* InferenceService::ModelStatistics(Context* ctx, const inference::ModelStatisticsRequest* request,
                                           inference::ModelStatisticsResponse* response) {
  return Answer(service_, ctx, "statistics").run([&] {
    const auto r = service_.statistics_json(request->name(), request->version());
    return r.status.ok() ? from_json(r.value, response) : to_grpc(r.status);
  });
}

Reactor* InferenceService::RepositoryIndex(Context* ctx, const inference::RepositoryIndexRequest* request,
                                           inference::RepositoryIndexResponse* response) {
  return Answer(service_, ctx, "repository_index").run([&] {
    // HTTP's form is the bare array; the message wraps it.
    const json models = json::parse(service_.repository_index_json(request->ready()));
    return from_json(json{{"models", models}}.dump(), response);
  });
}

Reactor* InferenceService::RepositoryModelLoad(Context* ctx, const inference::RepositoryModelLoadRequest* request,
                                               inference::RepositoryModelLoadResponse*) {
  const Clock::time_point t0 = Clock::now();
  const auto config = load_config(*request);
  if (!config.status.ok()) return Answer(service_, ctx, "repository_load").run([&] { return to_grpc(config.status); });
  auto* reactor = ctx->DefaultReactor();
  // The reload ends on the server's main thread; DefaultReactor may finish from any thread.
  service_.load(request->model_name(), config.value, [this, reactor, t0](triton::Status status) {
    const grpc::Status answer = to_grpc(status);
    service_.observe("grpc", "repository_load", answer.error_code(), seconds_since(t0));
    reactor->Finish(answer);
  });
  return reactor;
}

Reactor* InferenceService::RepositoryModelUnload(Context* ctx, const inference::RepositoryModelUnloadRequest* request,
                                                 inference::RepositoryModelUnloadResponse*) {
  return Answer(service_, ctx, "repository_unload").run([&] { return to_grpc(service_.unload(request->model_name())); });
}

Reactor* InferenceService::SystemSharedMemoryStatus(Context* ctx,
                                                    const inference::SystemSharedMemoryStatusRequest* request,
                                                    inference::SystemSharedMemoryStatusResponse* response) {
  return Answer(service_, ctx, "shm_status").run([&] {
    const auto r = service_.shm_status_json(request->name());
    if (!r.status.ok()) return to_grpc(r.status);
    json regions = json::object();  // HTTP's form is an array; the message is a map by name
    for (const json& region : json::parse(r.value)) regions[region.at("name").get<std::string>()] = region;
    return from_json(json{{"regions", regions}}.dump(), response);
  });
}

Reactor* InferenceService::SystemSharedMemoryRegister(Context* ctx,
                                                      const inference::SystemSharedMemoryRegisterRequest* request,
                                                      inference::SystemSharedMemoryRegisterResponse*) {
  return Answer(service_, ctx, "shm_register").run([&] {
    return to_grpc(service_.shm_register(request->name(), request->key(), request->offset(), request->byte_size()));
  });
}

Reactor* InferenceService::SystemSharedMemoryUnregister(Context* ctx,
                                                        const inference::SystemSharedMemoryUnregisterRequest* request,
                                                        inference::SystemSharedMemoryUnregisterResponse*) {
  return Answer(service_, ctx, "shm_unregister").run([&] { return to_grpc(service_.shm_unregister(request->name())); });
}

Reactor* InferenceService::CudaSharedMemoryStatus(Context* ctx, const inference::CudaSharedMemoryStatusRequest*,
                                                  inference::CudaSharedMemoryStatusResponse*) {
  return Answer(service_, ctx, "cuda_shm").run([] { return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, kNoCuda); });
}

Reactor* InferenceService::CudaSharedMemoryRegister(Context* ctx, const inference::CudaSharedMemoryRegisterRequest*,
                                                    inference::CudaSharedMemoryRegisterResponse*) {
  return Answer(service_, ctx, "cuda_shm").run([] { return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, kNoCuda); });
}

Reactor* InferenceService::CudaSharedMemoryUnregister(Context* ctx, const inference::CudaSharedMemoryUnregisterRequest*,
                                                      inference::CudaSharedMemoryUnregisterResponse*) {
  return Answer(service_, ctx, "cuda_shm").run([] { return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, kNoCuda); });
}

}  // namespace corepool::grpc_api
