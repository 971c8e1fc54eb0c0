// inference.GRPCInferenceService over triton::Service: each RPC is a thin
// adapter (parse the message, ask the Service, turn its JSON into the reply
// with JsonStringToMessage). Runs on gRPC's callback threads, never on the
// HTTP loop; nothing here blocks: ModelInfer and RepositoryModelLoad finish
// from the Service's completion callback. Owned by GrpcServer; the Service
// must outlive it.
#pragma once

#include <grpcpp/grpcpp.h>

#include "supervisor/grpc/proto/grpc_service.grpc.pb.h"
#include "supervisor/serve/triton_service.h"

namespace corepool::grpc_api {

// triton::Code -> the grpc::StatusCode of the same name.
grpc::StatusCode status_code(triton::Code code);

class InferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  explicit InferenceService(triton::Service& service) : service_(service) {}

  using Context = grpc::CallbackServerContext;
  using Reactor = grpc::ServerUnaryReactor;

  Reactor* ServerLive(Context*, const inference::ServerLiveRequest*, inference::ServerLiveResponse*) override;
  Reactor* ServerReady(Context*, const inference::ServerReadyRequest*, inference::ServerReadyResponse*) override;
  Reactor* ModelReady(Context*, const inference::ModelReadyRequest*, inference::ModelReadyResponse*) override;
  Reactor* ServerMetadata(Context*, const inference::ServerMetadataRequest*,
                          inference::ServerMetadataResponse*) override;
  Reactor* ModelMetadata(Context*, const inference::ModelMetadataRequest*, inference::ModelMetadataResponse*) override;
  Reactor* ModelInfer(Context*, const inference::ModelInferRequest*, inference::ModelInferResponse*) override;
  Reactor* ModelConfig(Context*, const inference::ModelConfigRequest*, inference::ModelConfigResponse*) override;
  Reactor* ModelStatistics(Context*, const inference::ModelStatisticsRequest*,
                           inference::ModelStatisticsResponse*) override;
  Reactor* RepositoryIndex(Context*, const inference::RepositoryIndexRequest*,
                           inference::RepositoryIndexResponse*) override;
  Reactor* RepositoryModelLoad(Context*, const inference::RepositoryModelLoadRequest*,
                               inference::RepositoryModelLoadResponse*) override;
  Reactor* RepositoryModelUnload(Context*, const inference::RepositoryModelUnloadRequest*,
                                 inference::RepositoryModelUnloadResponse*) override;
  Reactor* SystemSharedMemoryStatus(Context*, const inference::SystemSharedMemoryStatusRequest*,
                                    inference::SystemSharedMemoryStatusResponse*) override;
  Reactor* SystemSharedMemoryRegister(Context*, const inference::SystemSharedMemoryRegisterRequest*,
                                      inference::SystemSharedMemoryRegisterResponse*) override;
  Reactor* SystemSharedMemoryUnregister(Context*, const inference::SystemSharedMemoryUnregisterRequest*,
                                        inference::SystemSharedMemoryUnregisterResponse*) override;
  Reactor* CudaSharedMemoryStatus(Context*, const inference::CudaSharedMemoryStatusRequest*,
                                  inference::CudaSharedMemoryStatusResponse*) override;
  Reactor* CudaSharedMemoryRegister(Context*, const inference::CudaSharedMemoryRegisterRequest*,
                                    inference::CudaSharedMemoryRegisterResponse*) override;
  Reactor* CudaSharedMemoryUnregister(Context*, const inference::CudaSharedMemoryUnregisterRequest*,
                                      inference::CudaSharedMemoryUnregisterResponse*) override;

 private:
  triton::Service& service_;
};

}  // namespace corepool::grpc_api
