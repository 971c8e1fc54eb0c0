// The serve lifecycle. Threads: this one (signals, reloads: SIGHUP's and the
// repository loads the service queues here, retiring old generations,
// systemd status), the HTTP loop (routes, watchdog ticks), the
// audio decoders, and the executor's own (engine threads, or the pool's loop
// with its forked workers). Generations are shared_ptrs: requests in flight
// hold theirs, and only this thread destroys one, once nothing else holds it.
#include "supervisor/serve/serve.h"

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <future>

#include <spdlog/spdlog.h>

#include "config/config_error.h"
#include "supervisor/serve/fd_limit.h"
#include "supervisor/serve/reload_check.h"
#include "supervisor/serve/serve_process.h"
#include "supervisor/serve/signal_pipe.h"
#include "worker/model/model.h"

namespace corepool {

HttpServerOptions ServeProcess::http_options(const std::vector<ListenFd>& inherited) {
  HttpServerOptions o;
  if (inherited.empty()) {
    o.tcp_host.clear();
    if (!config_.listen.empty()) {
      const HostPort hp = parse_host_port(config_.listen, "serve.listen");
      o.tcp_host = hp.host;
      o.tcp_port = hp.port;
    }
    o.unix_path = config_.unix_socket;
    o.unix_group = config_.unix_socket_group;
  } else {  // socket activation: systemd owns the addresses
    o.tcp_host.clear();
    for (const auto& l : inherited) {
      if (l.name != "grpc") o.inherited_fds.push_back(l.fd);  // "grpc" is the gRPC server's
    }
  }
  o.max_body_bytes = static_cast<std::uint64_t>(config_.max_body_mb) << 20;
  o.max_connections = config_.max_connections;
  o.idle_timeout_ms = config_.idle_timeout_s * 1000;
  o.header_timeout_ms = config_.header_timeout_s * 1000;
  o.body_timeout_ms = config_.body_timeout_s * 1000;
  o.ws_idle_timeout_ms = config_.stream_idle_s * 1000;
  if (auto interval = notifier_.watchdog_interval()) {
    o.tick_ms = static_cast<int>(std::max<int64_t>(1, interval->count() / 2000));
    o.on_tick = [this] { on_tick(); };
  }
  return o;
}

ExitCode ServeProcess::start() {
  raise_fd_limit(config_.max_connections);
  const auto t0 = Clock::now();
  std::vector<ListenFd> inherited;
  try {
    inherited = inherited_listeners();
  } catch (const std::exception& e) {
    spdlog::error("socket activation: {}", e.what());
    return ExitCode::kCannotListen;
  }
  try {
    doors_ = std::make_unique<triton::Doors>(triton::resolve_api_token(config_), config_.allow_model_control);
  } catch (const ConfigError& e) {
    spdlog::error("{}", e.what());
    return ExitCode::kUsage;
  }
  service_ = std::make_unique<ServeService>(
      *this, metrics_, triton::ClientShmOptions{config_.allow_client_shm, config_.client_shm_group});
  try {
    auto model = load_model(config_.model_dir);
    current_ = std::make_shared<Generation>(++generations_, config_, std::move(model), service_->statistics());
  } catch (const ModelError& e) {
    spdlog::error("model error: {}", e.what());
    return ExitCode::kModelError;
  }
  audio_ = std::make_unique<AudioTagger>(config_.audio_threads, static_cast<size_t>(config_.max_audio_requests));
  streams_ = std::make_unique<StreamRegistry>(config_.max_streams, config_.stream_idle_s, *service_,
                                              [this] { return current(); });
  streams_->set_tap([this](std::unique_ptr<StreamOutput> out, const std::string& model) {
    return events_.tap(std::move(out), model);
  });
  sources_ = std::make_unique<SourceSet>(*service_, [this] { return current(); }, &events_);
  try {
    SourceSet::check_models(config_.sources, current_->model().config.name);
  } catch (const ConfigError& e) {
    spdlog::error("{}", e.what());
    return ExitCode::kUsage;
  }
  routes_ = std::make_unique<ServeRoutes>(*service_, *this, metrics_, *audio_, *doors_, *streams_,
                                          config_.retry_after_s, config_.stream_idle_s);
  http_ = std::make_unique<HttpServer>(http_options(inherited));
  try {
    http_->start([this](HttpRequest&& r, Responder responder) { routes_->handle(std::move(r), std::move(responder)); });
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return ExitCode::kCannotListen;
  }
  if (const ExitCode rc = start_grpc(inherited); rc != ExitCode::kOk) return rc;
  sources_->apply(config_.sources, current_->model().config.name);
  std::string where;
  if (!inherited.empty()) where = std::to_string(inherited.size()) + " socket(s) from systemd";
  else if (http_->port() > 0) where = "http://" + parse_host_port(config_.listen, "serve.listen").host + ":" + std::to_string(http_->port());
  if (!config_.unix_socket.empty() && inherited.empty()) where += (where.empty() ? "unix:" : " and unix:") + config_.unix_socket;
  spdlog::info("serving model \"{}\" on {} ({} mode, {} workers), ready in {} ms", current_->model().config.name, where,
               config_.mode, current_->executor().workers(),
               std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
  notifier_.ready(status_line());
  return ExitCode::kOk;
}

// gRPC on its own threads (supervisor/grpc/), over the same service as HTTP.
ExitCode ServeProcess::start_grpc(const std::vector<ListenFd>& inherited) {
  GrpcPlan plan = grpc_plan(config_, inherited);
  if (!plan.enabled) return ExitCode::kOk;
  plan.options.doors = doors_.get();
  plan.options.streams = streams_.get();
  grpc_ = std::make_unique<GrpcServer>(*service_, plan.options);
  try {
    grpc_->start();
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return ExitCode::kCannotListen;
  }
  spdlog::info("gRPC: serving on {}", grpc_->where());
  return ExitCode::kOk;
}

ExitCode ServeProcess::run() {
  SignalPipe signals;
  // A client that hangs up mid-response must cost an EPIPE, not the process.
  ::signal(SIGPIPE, SIG_IGN);
  if (const ExitCode rc = start(); rc != ExitCode::kOk) {
    shutdown();
    return rc;
  }
  for (;;) {
    const int sig = signals.wait(std::chrono::milliseconds(retired_.empty() ? 1000 : 50));
    if (sig == SIGHUP) reload("SIGHUP");
    run_pending_loads(false);
    if (sig == SIGTERM || sig == SIGINT) {
      spdlog::info("{}: draining (up to {} s), then exiting", strsignal(sig), config_.drain_timeout_s);
      break;
    }
    retire_idle();
    if (Clock::now() - status_at_ >= std::chrono::seconds(2)) notifier_.status(status_line());
  }
  notifier_.stopping();
  lame_duck(signals);
  shutdown();
  spdlog::info("stopped");
  return ExitCode::kOk;
}

void ServeProcess::request_reload(std::string engine_toml, std::function<void(triton::Status)> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_loads_.push_back({std::move(engine_toml), std::move(done)});
  }
  SignalPipe::wake();
}

// Main thread. At shutdown the loads still queued are answered unavailable.
void ServeProcess::run_pending_loads(bool answer_unavailable) {
  std::vector<PendingLoad> loads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    loads.swap(pending_loads_);
  }
  for (PendingLoad& load : loads) {
    if (answer_unavailable) {
      load.done({triton::Code::kUnavailable, "the server is shutting down"});
    } else {
      load.done(reload("repository load", load.engine_toml));
    }
  }
}

triton::Status ServeProcess::reload(const char* why, const std::string& engine_toml) {
  notifier_.reloading();
  const auto t0 = Clock::now();
  spdlog::info("{}: reloading config and model", why);
  triton::Status status;
  try {
    Config next = options_.reload_config ? options_.reload_config() : config_;
    if (!engine_toml.empty()) override_engine_keys(next, "parameters.config", engine_toml);
    check_reloadable(config_, next);
    spdlog::set_level(spdlog::level::from_str(next.log_level));
    auto model = load_model(next.model_dir);
    SourceSet::check_models(next.sources, model->config.name);
    auto gen = std::make_shared<Generation>(generations_ + 1, next, std::move(model), service_->statistics());
    {
      std::lock_guard<std::mutex> lock(mu_);
      retired_.push_back(std::move(current_));
      current_ = std::move(gen);
    }
    ++generations_;
    config_ = next;
    service_->loaded();
    sources_->apply(config_.sources, current()->model().config.name);
    spdlog::info("reload done in {} ms: generation {} serves model \"{}\" from {}",
                 std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count(), generations_,
                 current()->model().config.name, next.model_dir);
  } catch (const std::exception& e) {  // the config file or the model on disk: the server's, not the client's
    status = {triton::Code::kInternal, e.what()};
  }
  if (!status.ok()) {
    ++reloads_failed_;
    spdlog::error("reload failed, generation {} keeps serving: {}", generations_, status.message);
    status.message = "reload failed, generation " + std::to_string(generations_) + " keeps serving: " + status.message;
  }
  notifier_.ready(status_line());
  return status;
}

// An old generation goes once only this list holds it: every request it took
// has been answered. Its last segments (of requests answered at their
// deadline) finish first, so that its counters are final when they join
// finished_; until then snapshot() reads them live. Its destructor, outside
// the lock, stops the workers and frees the weights.
void ServeProcess::retire_idle() {
  for (size_t i = 0; i < retired_.size();) {
    std::shared_ptr<Generation> gen = retired_[i];
    if (gen.use_count() > 2) {  // more than the list's and this copy: a request still holds it
      ++i;
      continue;
    }
    gen->executor().wait_idle();
    {
      std::lock_guard<std::mutex> lock(mu_);
      add_executor_counters(finished_, gen->executor().stats());
      retired_.erase(retired_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    const uint64_t n = gen->number();
    gen.reset();
    spdlog::info("generation {} retired: its workers are stopped and its weights freed", n);
  }
}

// Readiness goes false at once; the listeners stay open so that clients a
// load balancer still sends here are served, until it has noticed. Repository
// loads queued meanwhile still run. A second SIGTERM or SIGINT cuts it short.
void ServeProcess::lame_duck(SignalPipe& signals) {
  if (config_.lame_duck_s <= 0 || !service_) return;
  service_->enter_lame_duck();
  spdlog::info("lame duck: readiness answers 503, requests are still served for {} s", config_.lame_duck_s);
  const auto end = Clock::now() + std::chrono::seconds(config_.lame_duck_s);
  for (auto now = Clock::now(); now < end; now = Clock::now()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - now);
    const int sig = signals.wait(std::min(left, std::chrono::milliseconds(retired_.empty() ? 1000 : 50)));
    run_pending_loads(false);
    retire_idle();
    if (sig == SIGTERM || sig == SIGINT) {
      spdlog::info("{} again: lame duck ends early", strsignal(sig));
      return;
    }
  }
}

void ServeProcess::shutdown() {
  // gRPC drains on a thread of its own while HTTP drains here. Its drain ends
  // only once every call is answered, repository loads included, which this
  // thread answers: keep answering them (unavailable) until it is done.
  std::future<void> grpc_stopped;
  if (grpc_) {
    grpc_stopped = std::async(std::launch::async, [grpc = grpc_.get(), drain = config_.drain_timeout_s] {
      grpc->stop(std::chrono::seconds(drain));
    });
  }
  // HTTP's drain tells each stream to flush and close (1001); then their threads are joined.
  if (http_) http_->stop(std::chrono::seconds(config_.drain_timeout_s));
  if (sources_) sources_->stop();  // each source flushes its open events to its sinks
  if (streams_) streams_->stop();
  if (audio_) audio_->stop();
  run_pending_loads(true);
  while (grpc_stopped.valid() && grpc_stopped.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    run_pending_loads(true);
  }
  routes_.reset();
  std::lock_guard<std::mutex> lock(mu_);
  retired_.clear();  // each destructor waits for its last segments
  current_.reset();
}

ExitCode run_serve(const ServeOptions& options) {
  ServeProcess server(options);
  return server.run();
}

}  // namespace corepool
