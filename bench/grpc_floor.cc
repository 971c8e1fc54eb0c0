// See grpc_floor.h. The completion-queue server answers on the thread that
// polls its queue (the fewest thread hops gRPC allows); the others use
// gRPC's own threads, the mixed one too: its callback method brings gRPC's
// pollers for the callback API, which read the sockets as well.
#include "bench/grpc_floor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "supervisor/grpc/proto/grpc_service.grpc.pb.h"

namespace corepool::bench {
namespace {

using inference::GRPCInferenceService;
using inference::ServerLiveRequest;
using inference::ServerLiveResponse;

class SyncLive final : public GRPCInferenceService::Service {
  grpc::Status ServerLive(grpc::ServerContext*, const ServerLiveRequest*, ServerLiveResponse* out) override {
    out->set_live(true);
    return grpc::Status::OK;
  }
};

class CallbackLive final : public GRPCInferenceService::CallbackService {
  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx, const ServerLiveRequest*,
                                       ServerLiveResponse* out) override {
    out->set_live(true);
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// The completion-queue service with one method (ServerReady) served by the
// callback API instead, the mix tried for ModelInfer (branch grpc-cq, not
// merged; corepool serves every method by the callback API): the callback
// API brings gRPC's own threads polling the same sockets.
class MixedLive final : public GRPCInferenceService::AsyncService {
 public:
  MixedLive() {
    MarkMethodCallback(1, new grpc::internal::CallbackUnaryHandler<inference::ServerReadyRequest,
                                                                   inference::ServerReadyResponse>(
                              [](grpc::CallbackServerContext* ctx, const inference::ServerReadyRequest*,
                                 inference::ServerReadyResponse*) {
                                auto* reactor = ctx->DefaultReactor();
                                reactor->Finish(grpc::Status::OK);
                                return reactor;
                              }));
  }
};

// One ServerLive call in flight on the completion queue at a time, and one
// posted to accept the next.
class QueueLive {
 public:
  QueueLive(GRPCInferenceService::AsyncService& service, grpc::ServerCompletionQueue& cq) : service_(service), cq_(cq) {}
  void run() {
    post();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
      auto* call = static_cast<Call*>(tag);
      if (!ok || call->finished) {
        delete call;
        continue;
      }
      post();
      call->response.set_live(true);
      call->finished = true;
      call->writer.Finish(call->response, grpc::Status::OK, call);
    }
  }

 private:
  struct Call {
    grpc::ServerContext ctx;
    ServerLiveRequest request;
    ServerLiveResponse response;
    grpc::ServerAsyncResponseWriter<ServerLiveResponse> writer{&ctx};
    bool finished = false;
  };
  void post() {
    auto* call = new Call;
    service_.RequestServerLive(&call->ctx, &call->request, &call->writer, &cq_, &cq_, call);
  }
  GRPCInferenceService::AsyncService& service_;
  grpc::ServerCompletionQueue& cq_;
};

std::vector<double> call_live(int port, int requests) {
  auto stub = GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  std::vector<double> us;
  for (int i = 0; i < requests; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    ServerLiveResponse response;
    if (!stub->ServerLive(&ctx, ServerLiveRequest(), &response).ok()) return {};
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us;
}

// `async`: ServerLive is served from a completion queue, `service` otherwise.
void measure(const char* name, int requests, grpc::Service* service, GRPCInferenceService::AsyncService* async) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(async ? async : service);
  std::unique_ptr<grpc::ServerCompletionQueue> cq = async ? builder.AddCompletionQueue() : nullptr;
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  std::thread poller;
  if (async) poller = std::thread([&] { QueueLive(*async, *cq).run(); });
  call_live(port, requests / 4);  // warm up the channel
  const std::vector<double> us = call_live(port, requests);
  server->Shutdown();
  if (cq) cq->Shutdown();
  if (poller.joinable()) poller.join();
  if (us.empty()) {
    std::printf("| %s | failed | |\n", name);
    return;
  }
  std::printf("| %s | %.0f | %.0f |\n", name, us[us.size() / 2], us[us.size() * 9 / 10]);
}

}  // namespace

void print_bare_grpc_floor(int requests) {
  std::printf("\n## gRPC's own floor on this machine (ServerLive, a minimal in-process server, no corepool code)\n");
  std::printf("| server API | p50 us | p90 us |\n|---|---|---|\n");
  SyncLive sync;
  CallbackLive callback;
  GRPCInferenceService::AsyncService async;
  MixedLive mixed;
  measure("synchronous", requests, &sync, nullptr);
  measure("callback (corepool's)", requests, &callback, nullptr);
  measure("completion queue, answered on its polling thread", requests, nullptr, &async);
  measure("the same, with a callback method in the server (mixed)", requests, nullptr, &mixed);
  std::fflush(stdout);
}

}  // namespace corepool::bench
