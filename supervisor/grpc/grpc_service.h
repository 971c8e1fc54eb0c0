// inference.GRPCInferenceService over triton::Service: each RPC is a thin
// adapter (parse the message, ask the Service, turn its JSON into the reply
// with JsonStringToMessage). Runs on gRPC's callback threads, never on the
// HTTP loop; nothing here blocks: ModelInfer and RepositoryModelLoad finish
// from the Service's completion callback, ModelStreamInfer's responses come
// from its sequences' threads (grpc_stream.h). Owned by GrpcServer; the Service
// must outlive it.
//
// Every method is registered "raw" (bytes in, bytes out) and parses its own
// message: gRPC's typed handlers answer a message that does not parse with
// UNIMPLEMENTED, where a client must read INVALID_ARGUMENT.
#pragma once

#include <functional>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/service_type.h>

#include "supervisor/grpc/proto/grpc_service.pb.h"
#include "supervisor/triton/audio_streams.h"
#include "supervisor/triton/doors.h"
#include "supervisor/triton/triton_service.h"

namespace corepool::grpc_api {

// triton::Code -> the grpc::StatusCode of the same name.
grpc::StatusCode status_code(triton::Code code);

class InferenceService final : public grpc::Service {
 public:
  // `doors` (may be null: no check) guards load, unload and shm (un)registration;
  // `streams` (may be null: refused) opens ModelStreamInfer's sequences, each
  // call keeping at most `stream_backlog` responses for a client that does not read.
  InferenceService(triton::Service& service, triton::Doors* doors, AudioStreams* streams = nullptr,
                   size_t stream_backlog = 4096);

 private:
  using Context = grpc::CallbackServerContext;
  using RawHandler = std::function<grpc::ServerUnaryReactor*(Context*, const grpc::ByteBuffer*, grpc::ByteBuffer*)>;
  template <class Req, class Resp>
  using Handler = grpc::Status (InferenceService::*)(const Req&, Resp&);

  void add_raw(const char* method, RawHandler handler);
  // A method answered before its handler returns; `endpoint` names it in /metrics.
  // `guarded`: the call must pass the doors first (door()).
  template <class Req, class Resp>
  void add(const char* method, const char* endpoint, Handler<Req, Resp> handler, bool guarded = false);
  // The doors' answer for this call's "authorization" metadata; OK without doors.
  grpc::Status door(Context* ctx);

  grpc::ServerUnaryReactor* model_infer(Context* ctx, const grpc::ByteBuffer* in, grpc::ByteBuffer* out);
  grpc::ServerUnaryReactor* repository_load(Context* ctx, const grpc::ByteBuffer* in, grpc::ByteBuffer* out);

  grpc::Status server_live(const inference::ServerLiveRequest&, inference::ServerLiveResponse&);
  grpc::Status server_ready(const inference::ServerReadyRequest&, inference::ServerReadyResponse&);
  grpc::Status model_ready(const inference::ModelReadyRequest&, inference::ModelReadyResponse&);
  grpc::Status server_metadata(const inference::ServerMetadataRequest&, inference::ServerMetadataResponse&);
  grpc::Status model_metadata(const inference::ModelMetadataRequest&, inference::ModelMetadataResponse&);
  grpc::Status model_config(const inference::ModelConfigRequest&, inference::ModelConfigResponse&);
  grpc::Status model_statistics(const inference::ModelStatisticsRequest&, inference::ModelStatisticsResponse&);
  grpc::Status repository_index(const inference::RepositoryIndexRequest&, inference::RepositoryIndexResponse&);
  grpc::Status repository_unload(const inference::RepositoryModelUnloadRequest&,
                                 inference::RepositoryModelUnloadResponse&);
  grpc::Status shm_status(const inference::SystemSharedMemoryStatusRequest&,
                          inference::SystemSharedMemoryStatusResponse&);
  grpc::Status shm_register(const inference::SystemSharedMemoryRegisterRequest&,
                            inference::SystemSharedMemoryRegisterResponse&);
  grpc::Status shm_unregister(const inference::SystemSharedMemoryUnregisterRequest&,
                              inference::SystemSharedMemoryUnregisterResponse&);
  template <class Req, class Resp>
  grpc::Status cuda_shm(const Req&, Resp&);

  triton::Service& service_;
  triton::Doors* doors_;
  AudioStreams* streams_;
  size_t stream_backlog_;
  int methods_ = 0;
};

}  // namespace corepool::grpc_api
