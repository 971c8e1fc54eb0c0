// The serve lifecycle. Threads: this one (signals, reloads: SIGHUP's and the
// repository loads the service queues here, retiring old generations,
// systemd status), the HTTP loop (routes, watchdog ticks), the
// audio decoders, and the executor's own (engine threads, or the pool's loop
// with its forked workers). Generations are shared_ptrs: requests in flight
// hold theirs, and only this thread destroys one, once nothing else holds it.
#include "supervisor/serve/serve.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <chrono>
#include <future>
#include <mutex>
#include <vector>

#include <spdlog/spdlog.h>

#include "supervisor/grpc/grpc_server.h"
#include "supervisor/http/http_server.h"
#include "supervisor/serve/listen_fds.h"
#include "supervisor/serve/notifier.h"
#include "supervisor/pool/process_memory.h"
#include "supervisor/serve/serve_audio.h"
#include "supervisor/serve/serve_generation.h"
#include "supervisor/serve/serve_metrics.h"
#include "supervisor/serve/serve_routes.h"
#include "supervisor/serve/serve_service.h"
#include "worker/exit_codes.h"
#include "worker/model.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;

// Keep-alive connections cost one fd each; the default soft limit (often 1024)
// would cap a server configured for thousands.
void raise_fd_limit(int max_connections) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
    ::getrlimit(RLIMIT_NOFILE, &lim);
  }
  if (lim.rlim_cur < static_cast<rlim_t>(max_connections) + 64) {
    spdlog::warn("open-file limit {} is below serve.max_connections {} + 64: connections past it will fail "
                 "(raise LimitNOFILE= or ulimit -n)", lim.rlim_cur, max_connections);
  }
}

// SIGTERM/SIGINT/SIGHUP land in a pipe that the main thread polls. Not
// sigwait: that needs the signals blocked in every thread, and libraries
// start threads before main() (OpenBLAS's pool), which would then take the
// signal with its default action and kill the process.
class SignalPipe {
 public:
  SignalPipe() {
    if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2() failed for the signal pipe");
    write_fd_ = fds_[1];
    struct sigaction sa {};
    sa.sa_handler = &SignalPipe::on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  }
  ~SignalPipe() {
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::signal(sig, SIG_DFL);
    write_fd_ = -1;
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  // Wakes wait() from any thread (0 for a signal): work was queued for the main thread.
  static void wake() { on_signal(0); }
  // The next signal received, or 0 when `timeout` passes first or wake() was called.
  int wait(std::chrono::milliseconds timeout) {
    pollfd p{fds_[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return 0;
    unsigned char sig = 0;
    return ::read(fds_[0], &sig, 1) == 1 ? sig : 0;
  }

 private:
  static void on_signal(int sig) {  // async-signal-safe: one write, errno kept
    const int saved = errno;
    const unsigned char byte = static_cast<unsigned char>(sig);
    if (write_fd_ >= 0 && ::write(write_fd_, &byte, 1) < 0) {
      // a full pipe already holds a wake-up: nothing is lost
    }
    errno = saved;
  }
  static inline volatile sig_atomic_t write_fd_ = -1;
  int fds_[2] = {-1, -1};
};

// Settings that belong to the process, not to a generation: a reload cannot
// change them. The mode is refused outright: a process that has run LibTorch
// ops (thread mode) must not fork workers, and the reverse would make every
// later reload unsafe.
void check_reloadable(const Config& now, const Config& next) {
  if (next.mode != now.mode) {
    throw ConfigError("engine.mode cannot change on reload (" + now.mode + " -> " + next.mode + "): restart the service");
  }
  auto warn = [](const char* key, bool changed) {
    if (changed) spdlog::warn("reload: {} changed; it takes effect at the next restart", key);
  };
  warn("serve.listen", next.listen != now.listen);
  warn("serve.unix_socket", next.unix_socket != now.unix_socket);
  warn("serve.unix_socket_group", next.unix_socket_group != now.unix_socket_group);
  warn("serve.grpc_listen / grpc_max_message_mb",
       next.grpc_listen != now.grpc_listen || next.grpc_max_message_mb != now.grpc_max_message_mb);
  warn("serve.max_connections / timeouts / body limit",
       next.max_connections != now.max_connections || next.idle_timeout_s != now.idle_timeout_s ||
           next.header_timeout_s != now.header_timeout_s || next.body_timeout_s != now.body_timeout_s ||
           next.max_body_mb != now.max_body_mb);
  warn("serve.audio_threads / max_audio_requests",
       next.audio_threads != now.audio_threads || next.max_audio_requests != now.max_audio_requests);
  warn("engine.intra_op_threads / inter_op_threads",
       next.intra_op_threads != now.intra_op_threads || next.inter_op_threads != now.inter_op_threads);
}

class Server final : public ServeContext, public ServeHost {
 public:
  explicit Server(const ServeOptions& options) : options_(options), config_(options.config) {}
  ExitCode run();

  std::shared_ptr<Generation> current() override {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }
  ServeSnapshot snapshot() override;
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
  void shutdown();

  const ServeOptions& options_;
  Config config_;  // main thread: the config of the current generation
  Notifier notifier_;
  ServeMetrics metrics_;
  std::mutex mu_;
  std::shared_ptr<Generation> current_;
  // Under mu_ (the main thread adds and removes; snapshot() reads): replaced
  // generations still answering their requests.
  std::vector<std::shared_ptr<Generation>> retired_;
  ExecutorStats finished_;  // under mu_: the counters of generations gone
  uint64_t generations_ = 0;
  std::atomic<uint64_t> reloads_failed_{0};
  std::vector<PendingLoad> pending_loads_;  // under mu_: repository loads for the main thread
  std::unique_ptr<ServeService> service_;
  std::unique_ptr<AudioTagger> audio_;
  std::unique_ptr<ServeRoutes> routes_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<GrpcServer> grpc_;  // null when serve.grpc_listen is "" (or no "grpc" socket from systemd)
  Clock::time_point last_ready_ = Clock::now();  // loop thread: when every worker was last ready
  uint64_t status_requests_ = 0;                 // main thread: request count at the last status
  Clock::time_point status_at_ = Clock::now();
};

HttpServerOptions Server::http_options(const std::vector<ListenFd>& inherited) {
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
  if (auto interval = notifier_.watchdog_interval()) {
    o.tick_ms = static_cast<int>(std::max<int64_t>(1, interval->count() / 2000));
    o.on_tick = [this] { on_tick(); };
  }
  return o;
}

// Loop thread. WATCHDOG=1 proves the loop turns; it is withheld when the pool
// has not had every worker ready for a minute (crash-looping workers), so that
// systemd restarts the service.
void Server::on_tick() {
  const auto now = Clock::now();
  if (current()->executor().stats().all_ready) last_ready_ = now;
  if (now - last_ready_ < std::chrono::seconds(60)) notifier_.watchdog();
}

ExitCode Server::start() {
  raise_fd_limit(config_.max_connections);
  const auto t0 = Clock::now();
  std::vector<ListenFd> inherited;
  try {
    inherited = inherited_listeners();
  } catch (const std::exception& e) {
    spdlog::error("socket activation: {}", e.what());
    return ExitCode::kCannotListen;
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
  routes_ = std::make_unique<ServeRoutes>(*service_, *this, metrics_, *audio_, config_.retry_after_s);
  http_ = std::make_unique<HttpServer>(http_options(inherited));
  try {
    http_->start([this](HttpRequest&& r, Responder responder) { routes_->handle(std::move(r), std::move(responder)); });
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return ExitCode::kCannotListen;
  }
  if (const ExitCode rc = start_grpc(inherited); rc != ExitCode::kOk) return rc;
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
ExitCode Server::start_grpc(const std::vector<ListenFd>& inherited) {
  const GrpcPlan plan = grpc_plan(config_, inherited);
  if (!plan.enabled) return ExitCode::kOk;
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

ExitCode Server::run() {
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
  shutdown();
  spdlog::info("stopped");
  return ExitCode::kOk;
}

void Server::request_reload(std::string engine_toml, std::function<void(triton::Status)> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_loads_.push_back({std::move(engine_toml), std::move(done)});
  }
  SignalPipe::wake();
}

// Main thread. At shutdown the loads still queued are answered unavailable.
void Server::run_pending_loads(bool answer_unavailable) {
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

triton::Status Server::reload(const char* why, const std::string& engine_toml) {
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
    auto gen = std::make_shared<Generation>(generations_ + 1, next, std::move(model), service_->statistics());
    {
      std::lock_guard<std::mutex> lock(mu_);
      retired_.push_back(std::move(current_));
      current_ = std::move(gen);
    }
    ++generations_;
    config_ = next;
    service_->loaded();
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
void Server::retire_idle() {
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

std::string Server::status_line() {
  const auto now = Clock::now();
  const uint64_t requests = http_ ? http_->stats().requests : 0;
  const double seconds = std::chrono::duration<double>(now - status_at_).count();
  const double rate = seconds > 0 ? (requests - status_requests_) / seconds : 0.0;
  status_requests_ = requests;
  status_at_ = now;
  const auto gen = current();
  if (!gen) return "starting";
  const ExecutorStats s = gen->executor().stats();
  const size_t up = std::count_if(s.pids.begin(), s.pids.end(), [](int p) { return p > 0; });
  return fmt::format("generation {}, model {}, {} mode, {}/{} workers {}, {:.1f} req/s", gen->number(),
                     gen->model().config.name, config_.mode, s.pids.empty() ? gen->executor().workers() : up,
                     gen->executor().workers(), s.all_ready ? "ready" : "up (some starting)", rate);
}

void Server::shutdown() {
  // gRPC drains on a thread of its own while HTTP drains here. Its drain ends
  // only once every call is answered, repository loads included, which this
  // thread answers: keep answering them (unavailable) until it is done.
  std::future<void> grpc_stopped;
  if (grpc_) {
    grpc_stopped = std::async(std::launch::async, [grpc = grpc_.get(), drain = config_.drain_timeout_s] {
      grpc->stop(std::chrono::seconds(drain));
    });
  }
  if (http_) http_->stop(std::chrono::seconds(config_.drain_timeout_s));
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

ServeSnapshot Server::snapshot() {
  ServeSnapshot s;
  const auto gen = current();
  s.http = http_ ? http_->stats() : HttpStats{};
  s.executor = gen->executor().stats();
  // Counters span generations (as Triton's statistics do): add the replaced
  // ones', draining or gone. No copy of a generation leaves the lock, so its
  // destructor stays the main thread's.
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& d : retired_) add_executor_counters(s.executor, d->executor().stats());
    add_executor_counters(s.executor, finished_);
  }
  s.mode = gen->config().mode;
  s.model = gen->model().config.name;
  s.optimize = gen->plan().optimize.applied;
  s.max_batch = gen->plan().max_batch;
  s.max_batch_measured = gen->plan().measured;
  s.generation = gen->number();
  s.reloads_failed = reloads_failed_.load();
  s.timed_out = service_ ? service_->timed_out() : 0;
  s.cancelled = (service_ ? service_->cancelled() : 0) + (audio_ ? audio_->cancelled() : 0);
  s.results_dropped = gen->results_dropped();
  s.audio_pending = audio_ ? audio_->pending() : 0;
  s.memory.emplace_back("supervisor", read_process_memory(::getpid()));
  for (size_t i = 0; i < s.executor.pids.size(); ++i) {
    if (s.executor.pids[i] > 0) s.memory.emplace_back("worker-" + std::to_string(i), read_process_memory(s.executor.pids[i]));
  }
  s.allocator = allocator_stats();
  return s;
}

}  // namespace

ExitCode run_serve(const ServeOptions& options) {
  Server server(options);
  return server.run();
}

}  // namespace corepool
