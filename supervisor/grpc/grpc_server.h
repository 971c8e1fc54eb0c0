// `corepool serve`'s gRPC endpoint (KServe v2 / Triton's
// inference.GRPCInferenceService) on its own threads: gRPC's callback threads
// run the RPCs, and with socket activation one more thread accepts on the
// listening socket systemd passed (gRPC C++ cannot adopt a listening socket,
// only connected ones). Started and stopped by serve.cc's ServeProcess, which owns
// the triton::Service it adapts: the Service must outlive stop().
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "config/config.h"
#include "supervisor/systemd/listen_fds.h"
#include "supervisor/triton/audio_streams.h"
#include "supervisor/triton/doors.h"
#include "supervisor/triton/triton_service.h"

namespace grpc {
class Server;
}

namespace corepool {
namespace grpc_api {
class InferenceService;
}

struct GrpcOptions {
  std::string listen;         // "host:port" (port 0: any free one); "" = no address of our own
  int inherited_fd = -1;      // a listening socket from systemd (FileDescriptorName=grpc); taken over
  int max_message_bytes = 64 << 20;  // either way; a bigger request gets RESOURCE_EXHAUSTED
  // Who may load, unload and register shared memory (serve's one Doors, shared
  // with HTTP; must outlive stop()). nullptr: no check (tests of the adapter alone).
  triton::Doors* doors = nullptr;
  // Where ModelStreamInfer's sequences are opened (serve's StreamRegistry;
  // must outlive stop()). nullptr: each sequence is refused with the reason.
  AudioStreams* streams = nullptr;
  // ModelStreamInfer responses waiting on one call for a client that does not
  // read; past this many, events are dropped (serve.grpc_stream_backlog).
  size_t stream_backlog = 4096;
};

// What serve's config and sockets say: socket-activated, only the fd named
// "grpc" (systemd owns the addresses: without that fd gRPC is off), else
// serve.grpc_listen. `enabled` is false when there is nothing to listen on.
struct GrpcPlan {
  bool enabled = false;
  GrpcOptions options;
};
GrpcPlan grpc_plan(const Config& config, const std::vector<ListenFd>& inherited);

class GrpcServer {
 public:
  GrpcServer(triton::Service& service, GrpcOptions options);
  ~GrpcServer();  // stop() with no drain, if not stopped
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds and starts serving; throws std::runtime_error naming the address
  // when it cannot.
  void start();
  // The bound TCP port (the chosen one for port 0); 0 with only an inherited socket.
  int port() const { return port_; }
  // "grpc://host:port" or "a socket from systemd", for the log.
  std::string where() const;
  // Stops accepting at once, lets calls in flight finish for up to `drain`,
  // then cancels the rest (their queued segments are dropped) and returns once
  // every call has ended.
  void stop(std::chrono::milliseconds drain);

 private:
  void accept_loop();

  triton::Service& service_;
  GrpcOptions options_;
  std::unique_ptr<grpc_api::InferenceService> rpcs_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  int wake_fd_ = -1;  // eventfd: tells accept_loop to end
  std::thread acceptor_;
  bool stopped_ = false;
};

}  // namespace corepool
