// triton::Service for `corepool serve`: the one implementation both wires
// adapt (serve_routes.cc for HTTP, supervisor/grpc/ for gRPC). It owns what
// the protocols share: the per-model statistics, the request deadlines, the
// unloaded flag and the client shared-memory registry. Made by
// serve.cc's ServeProcess once at start, destroyed at shutdown after the HTTP
// server stopped; infer calls it made may outlive it (they hold what they use).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "supervisor/triton/client_shm.h"
#include "supervisor/triton/deadline_timer.h"
#include "supervisor/triton/infer_call.h"
#include "supervisor/triton/serve_generation.h"
#include "supervisor/triton/serve_metrics.h"
#include "supervisor/triton/triton_service.h"

namespace corepool {

// What the service needs from the server around it.
class ServeHost {
 public:
  virtual std::shared_ptr<Generation> current() = 0;  // the generation new requests go to
  // Reloads config and model as a new generation on the main thread, the
  // SIGHUP path, with `engine_toml` ("" = none: a TOML [engine] table checked
  // by override_engine_keys) over the reloaded config. Never blocks: `done`
  // runs on the main thread once the new generation serves, or the reload failed.
  virtual void request_reload(std::string engine_toml, std::function<void(triton::Status)> done) = 0;

 protected:
  ~ServeHost() = default;
};

class ServeService final : public triton::Service {
 public:
  // Throws ConfigError when serve.client_shm_group names no group.
  ServeService(ServeHost& host, ServeMetrics& metrics, const triton::ClientShmOptions& client_shm);
  ~ServeService() override;
  ServeService(const ServeService&) = delete;
  ServeService& operator=(const ServeService&) = delete;

  bool live() override { return true; }
  bool server_ready() override;
  triton::Status model_ready(const std::string& model, const std::string& version) override;
  std::string server_metadata_json() override;
  triton::Result<std::string> model_metadata_json(const std::string& model, const std::string& version) override;
  triton::Result<std::string> model_config_json(const std::string& model, const std::string& version) override;
  triton::Result<std::string> statistics_json(const std::string& model, const std::string& version) override;
  std::string repository_index_json(bool ready_only) override;
  void load(const std::string& model, const std::string& config_json, std::function<void(triton::Status)> done) override;
  triton::Status unload(const std::string& model) override;
  triton::Status shm_register(const std::string& name, const std::string& key, uint64_t offset,
                              uint64_t byte_size) override;
  triton::Status shm_unregister(const std::string& name) override;
  triton::Result<std::string> shm_status_json(const std::string& name) override;
  triton::Result<ModelView> model_view(const std::string& model, const std::string& version) override;
  // Never returns null; `done` may have run before it returns.
  std::shared_ptr<triton::InferCall> infer(triton::InferInput&& input, triton::InferDone done) override;
  void observe(const std::string& protocol, const std::string& endpoint, int code, double seconds) override;

  // The model's statistics, for each generation to record its executions in.
  std::shared_ptr<ModelStatistics> statistics() const;
  // A new generation is serving (a repository load or SIGHUP): an unloaded
  // model is loaded again.
  void loaded() { unloaded_.store(false); }
  // SIGTERM with serve.lame_duck_s: from now on server_ready() is false (a
  // load balancer stops sending), while every request is still answered.
  void enter_lame_duck() { lame_duck_.store(true); }
  bool lame_duck() const { return lame_duck_.load(); }
  // Infer requests answered kDeadlineExceeded / cancelled before their answer, since start.
  uint64_t timed_out() const { return counters_->timed_out.load(); }
  uint64_t cancelled() const { return counters_->cancelled.load(); }

 private:
  // The current generation when `model` / `version` name its model, else kNotFound.
  triton::Result<std::shared_ptr<Generation>> find(const std::string& model, const std::string& version);
  // The items of an input in a client's region (read now), or its refusal.
  triton::Status read_shm_input(triton::InferInput& input, const ModelConfig& config, int64_t max_batch) const;

  ServeHost& host_;
  ServeMetrics& metrics_;
  std::atomic<bool> unloaded_{false};
  std::atomic<bool> lame_duck_{false};  // set once, at SIGTERM; never cleared  // POST .../unload until the next successful reload, whatever asked for it
  const std::shared_ptr<InferCounters> counters_ = std::make_shared<InferCounters>();
  // Triton's system shared memory: the regions clients registered (refuses
  // everything unless serve.allow_client_shm).
  const std::unique_ptr<triton::ClientShmRegistry> shm_;
  std::shared_ptr<DeadlineTimer> deadlines_ = std::make_shared<DeadlineTimer>();  // last: stops first
};

}  // namespace corepool
