// The serve process's one object: the current model generation and the ones
// being retired, the HTTP and gRPC servers over one triton::Service, the
// audio decoders, the systemd notifier. Made and run by run_serve()
// (serve.cc); its methods are split between serve.cc (lifecycle: start, the
// signal loop, reload, shutdown) and serve_process_status.cc (what it reports:
// status line, watchdog, metrics snapshot).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.h"
#include "supervisor/grpc/grpc_server.h"
#include "supervisor/http/http_server.h"
#include "supervisor/serve/event_hub.h"
#include "supervisor/serve/serve.h"
#include "supervisor/serve/serve_audio.h"
#include "supervisor/serve/serve_routes.h"
#include "supervisor/serve/source_set.h"
#include "supervisor/systemd/listen_fds.h"
#include "supervisor/systemd/notifier.h"
#include "supervisor/triton/doors.h"
#include "supervisor/triton/serve_generation.h"
#include "supervisor/triton/serve_metrics.h"
#include "supervisor/triton/serve_service.h"
#include "worker/exit_codes.h"

namespace corepool {

class SignalPipe;

class ServeProcess final : public ServeContext, public ServeHost {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ServeProcess(const ServeOptions& options) : options_(options), config_(options.config) {}
  ExitCode run();

  std::shared_ptr<Generation> current() override {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }
  ServeSnapshot snapshot() override;
  std::string sources_json() override { return sources_ ? sources_->list_json() : R"({"sources":[]})"; }
  std::shared_ptr<WsHandler> subscribe_events(WsSender sender) override { return events_.subscribe(std::move(sender)); }
  void request_reload(std::string engine_toml, std::function<void(triton::Status)> done) override;
  // What every wire (HTTP routes, gRPC) adapts; exists from start() to shutdown().
  triton::Service& service() { return *service_; }

 private:
  struct PendingLoad {
    std::string engine_toml;
    std::function<void(triton::Status)> done;
  };

  ExitCode start();
  HttpServerOptions http_options(const std::vector<ListenFd>& inherited);
  ExitCode start_grpc(const std::vector<ListenFd>& inherited);
  void on_tick();
  // A new generation from the config file (and `engine_toml` over its
  // [engine]) and the model on disk; the old one keeps serving if it fails.
  triton::Status reload(const char* why, const std::string& engine_toml = "");
  void run_pending_loads(bool answer_unavailable);
  void retire_idle();
  std::string status_line();
  // SIGTERM with serve.lame_duck_s > 0: readiness 503, everything else served, for that long.
  void lame_duck(SignalPipe& signals);
  void shutdown();

  const ServeOptions& options_;
  Config config_;  // main thread: the config of the current generation
  Notifier notifier_;
  ServeMetrics metrics_;
  EventHub events_;  // GET /v2/events; before the streams, sources and HTTP server that hold it
  std::mutex mu_;
  std::shared_ptr<Generation> current_;
  // Under mu_ (the main thread adds and removes; snapshot() reads): replaced
  // generations still answering their requests.
  std::vector<std::shared_ptr<Generation>> retired_;
  ExecutorStats finished_;  // under mu_: the counters of generations gone
  uint64_t generations_ = 0;
  std::atomic<uint64_t> reloads_failed_{0};
  std::vector<PendingLoad> pending_loads_;  // under mu_: repository loads for the main thread
  std::unique_ptr<triton::Doors> doors_;  // before the servers that hold a reference to it
  std::unique_ptr<ServeService> service_;
  std::unique_ptr<AudioTagger> audio_;
  std::unique_ptr<StreamRegistry> streams_;
  std::unique_ptr<SourceSet> sources_;  // the [[source]]s; stopped before the streams and the generations
  std::unique_ptr<ServeRoutes> routes_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<GrpcServer> grpc_;  // null when serve.grpc_listen is "" (or no "grpc" socket from systemd)
  Clock::time_point last_ready_ = Clock::now();  // loop thread: when every worker was last ready
  uint64_t status_requests_ = 0;                 // main thread: request count at the last status
  Clock::time_point status_at_ = Clock::now();
};

}  // namespace corepool
