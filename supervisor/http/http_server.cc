// HttpServer: listeners, the loop thread, the Responder hand-off and stop().
// Called by `corepool serve` (supervisor/serve/serve.cc). The loop thread owns every libuv
// handle after start(); other threads reach it only through the Mailbox.
// Connections live in connections_ until both their handles are closed.
#include "supervisor/http/http_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

#include <spdlog/spdlog.h>

#include "supervisor/http/http_connection.h"
#include "supervisor/http/http_mailbox.h"
#include "supervisor/http/http_unix_socket.h"
#include "supervisor/http/http_wire.h"

namespace corepool {
namespace {
constexpr int kBacklog = 511;
}  // namespace

using http::remove_stale_socket;
using http::resolve_group;
using http::throw_listen_error;

// ---- Responder -------------------------------------------------------------

struct Responder::State {
  std::shared_ptr<http::Mailbox> mailbox;
  std::uint64_t connection_id;
  std::uint64_t request_seq;
  std::atomic<bool> sent{false};
  std::mutex close_mu;               // guards the two below
  std::function<void()> on_close;    // set by Responder::on_close, run at most once
  bool gone = false;                 // the client left before the answer

  // Loop thread: the connection saw its client leave. Returns whether someone
  // was watching (and has now been told).
  bool client_gone() {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lock(close_mu);
      if (gone || sent.load()) return false;
      gone = true;
      fn = std::move(on_close);
    }
    if (!fn) return false;
    fn();
    return true;
  }

  ~State() {
    if (sent.exchange(true)) return;
    try {  // the documented safety net: a dropped Responder answers 500
      mailbox->post({connection_id, request_seq,
                     http::error_response(500, "handler dropped the request without responding"), std::nullopt});
    } catch (...) {
    }
  }
};

Responder::Responder(std::shared_ptr<State> state) : state_(std::move(state)) {}

void Responder::send(HttpResponse response) const {
  if (state_->sent.exchange(true)) {
    spdlog::warn("http: Responder::send called twice for one request; ignored");
    return;
  }
  state_->mailbox->post({state_->connection_id, state_->request_seq, std::move(response), std::nullopt});
}

bool Responder::sent() const { return state_->sent.load(); }

void Responder::on_close(std::function<void()> fn) const {
  {
    std::lock_guard<std::mutex> lock(state_->close_mu);
    if (!state_->gone) {
      state_->on_close = std::move(fn);
      return;
    }
  }
  if (!state_->sent.load()) fn();
}

void Responder::abandon() const { state_->sent.store(true); }

WsSender Responder::websocket() const { return WsSender(state_->mailbox, state_->connection_id); }

// ---- HttpServer::Impl ------------------------------------------------------

class HttpServer::Impl final : public http::ConnectionOwner {
 public:
  explicit Impl(HttpServerOptions options) : options_(std::move(options)) {}
  void start(Handler handler);
  void stop(std::chrono::milliseconds drain);
  int port() const { return port_; }
  HttpStats stats() const { return stats_.snapshot(); }

  const HttpServerOptions& options() const override { return options_; }
  http::StatsBoard& stats_board() override { return stats_; }
  void on_request(http::Connection& connection, HttpRequest&& request) override;
  void on_closed(http::Connection& connection) override;

 private:
  union Listener {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  };

  void open_listeners();
  void listen_tcp();
  void listen_unix();
  void listen_inherited(int fd);
  Listener& new_listener(bool is_pipe);
  int listen_on(Listener& listener);
  void abort_start();
  void on_connection(uv_stream_t* server, int status);
  void on_wake();
  void begin_stop(std::chrono::milliseconds drain);
  void maybe_finish();

  HttpServerOptions options_;
  Handler handler_;
  uv_loop_t loop_{};
  uv_async_t wake_{};
  uv_timer_t drain_timer_{};
  uv_timer_t tick_timer_{};
  std::vector<std::unique_ptr<Listener>> listeners_;  // freed after the loop has ended
  std::unordered_map<std::uint64_t, std::unique_ptr<http::Connection>> connections_;
  std::shared_ptr<http::Mailbox> mailbox_;
  http::StatsBoard stats_;
  std::thread thread_;
  std::uint64_t next_id_ = 1;
  int open_connections_ = 0;  // counted ones: rejected connections do not count
  int port_ = 0;
  bool unix_bound_ = false;
  bool stopping_ = false;  // loop thread
  bool finished_ = false;  // loop thread: wake_ and drain_timer_ closed
  std::mutex lifecycle_mu_;
  bool started_ = false;
  bool stopped_ = false;
};

void HttpServer::Impl::start(Handler handler) {
  std::lock_guard<std::mutex> lock(lifecycle_mu_);
  if (started_ || stopped_) throw std::logic_error("HttpServer::start called twice");
  if (int rc = uv_loop_init(&loop_); rc < 0)
    throw std::runtime_error(std::string("uv_loop_init failed: ") + uv_strerror(rc));
  loop_.data = this;
  uv_async_init(&loop_, &wake_, [](uv_async_t* a) { static_cast<Impl*>(a->loop->data)->on_wake(); });
  uv_timer_init(&loop_, &drain_timer_);
  uv_timer_init(&loop_, &tick_timer_);
  if (options_.tick_ms > 0 && options_.on_tick) {
    uv_timer_start(&tick_timer_, [](uv_timer_t* t) { static_cast<Impl*>(t->loop->data)->options_.on_tick(); },
                   static_cast<std::uint64_t>(options_.tick_ms), static_cast<std::uint64_t>(options_.tick_ms));
  }
  mailbox_ = std::make_shared<http::Mailbox>(&wake_);
  try {
    open_listeners();
  } catch (...) {
    abort_start();
    throw;
  }
  handler_ = std::move(handler);
  started_ = true;
  thread_ = std::thread([this] { uv_run(&loop_, UV_RUN_DEFAULT); });
}

// Undo a half-done start() on the calling thread: the loop never ran.
void HttpServer::Impl::abort_start() {
  mailbox_->close();
  for (auto& l : listeners_) uv_close(&l->handle, nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&drain_timer_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&tick_timer_), nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);  // runs the close callbacks
  uv_loop_close(&loop_);
  listeners_.clear();
  if (unix_bound_) ::unlink(options_.unix_path.c_str());
  unix_bound_ = false;
}

void HttpServer::Impl::open_listeners() {
  if (!options_.tcp_host.empty()) listen_tcp();
  if (!options_.unix_path.empty()) listen_unix();
  for (int fd : options_.inherited_fds) listen_inherited(fd);
  if (listeners_.empty()) throw std::runtime_error("HttpServer: no TCP host, Unix path or inherited fd to listen on");
}

HttpServer::Impl::Listener& HttpServer::Impl::new_listener(bool is_pipe) {
  auto listener = std::make_unique<Listener>();
  if (is_pipe) uv_pipe_init(&loop_, &listener->pipe, 0);
  else uv_tcp_init(&loop_, &listener->tcp);
  listener->handle.data = this;
  listeners_.push_back(std::move(listener));
  return *listeners_.back();
}

int HttpServer::Impl::listen_on(Listener& listener) {
  return uv_listen(&listener.stream, kBacklog, [](uv_stream_t* server, int status) {
    static_cast<Impl*>(server->data)->on_connection(server, status);
  });
}

void HttpServer::Impl::listen_tcp() {
  const bool v6 = options_.tcp_host.find(':') != std::string::npos;
  const std::string where = (v6 ? "[" + options_.tcp_host + "]" : options_.tcp_host) + ":" +
                            std::to_string(options_.tcp_port);
  sockaddr_storage addr{};
  int rc = v6 ? uv_ip6_addr(options_.tcp_host.c_str(), options_.tcp_port, reinterpret_cast<sockaddr_in6*>(&addr))
              : uv_ip4_addr(options_.tcp_host.c_str(), options_.tcp_port, reinterpret_cast<sockaddr_in*>(&addr));
  if (rc < 0) throw_listen_error(where, "not an IP address");
  Listener& listener = new_listener(false);
  rc = uv_tcp_bind(&listener.tcp, reinterpret_cast<sockaddr*>(&addr), 0);
  if (rc == 0) rc = listen_on(listener);  // libuv may defer a bind error to listen
  if (rc < 0) throw_listen_error(where, uv_strerror(rc));
  sockaddr_storage bound{};
  int len = sizeof(bound);
  uv_tcp_getsockname(&listener.tcp, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                   : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

void HttpServer::Impl::listen_unix() {
  const std::string& path = options_.unix_path;
  if (path.size() >= sizeof(sockaddr_un::sun_path)) throw_listen_error(path, "path too long for a Unix socket");
  const bool chown_group = !options_.unix_group.empty();
  const gid_t gid = chown_group ? resolve_group(path, options_.unix_group) : 0;
  remove_stale_socket(path);
  Listener& listener = new_listener(true);
  if (int rc = uv_pipe_bind(&listener.pipe, path.c_str()); rc < 0) throw_listen_error(path, uv_strerror(rc));
  unix_bound_ = true;
  // Before listen(): no client can connect while the mode is still the umask's.
  if (::chmod(path.c_str(), 0660) != 0) throw_listen_error(path, std::string("chmod: ") + std::strerror(errno));
  if (chown_group && ::chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    throw_listen_error(path, "chown to group '" + options_.unix_group + "': " + std::strerror(errno));
  }
  if (int rc = listen_on(listener); rc < 0) throw_listen_error(path, uv_strerror(rc));
}

void HttpServer::Impl::listen_inherited(int fd) {
  const std::string where = "inherited fd " + std::to_string(fd);
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw_listen_error(where, std::strerror(errno));
  const bool is_pipe = addr.ss_family == AF_UNIX;
  Listener& listener = new_listener(is_pipe);
  int rc = is_pipe ? uv_pipe_open(&listener.pipe, fd) : uv_tcp_open(&listener.tcp, fd);
  if (rc == 0) rc = listen_on(listener);
  if (rc < 0) throw_listen_error(where, uv_strerror(rc));
  if (!is_pipe && port_ == 0)
    port_ = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

void HttpServer::Impl::on_connection(uv_stream_t* server, int status) {
  if (status < 0) {
    spdlog::warn("http: accept failed: {}", uv_strerror(status));
    return;
  }
  const std::uint64_t id = next_id_++;
  auto owned = std::make_unique<http::Connection>(*this, &loop_, id, server->type == UV_NAMED_PIPE);
  http::Connection& connection = *owned;
  connections_.emplace(id, std::move(owned));
  if (uv_accept(server, connection.stream()) != 0) return connection.close();
  if (open_connections_ >= options_.max_connections) {
    stats_.connection_rejected();
    return connection.reject(503, "too many connections");
  }
  ++open_connections_;
  stats_.connection_opened();
  connection.start();
}

void HttpServer::Impl::on_request(http::Connection& connection, HttpRequest&& request) {
  stats_.request();
  auto state = std::make_shared<Responder::State>();
  state->mailbox = mailbox_;
  state->connection_id = connection.id();
  state->request_seq = connection.request_seq();
  connection.watch([weak = std::weak_ptr<Responder::State>(state)] {
    const auto watched = weak.lock();
    return watched && watched->client_gone();
  });
  Responder responder(std::move(state));
  try {
    handler_(std::move(request), responder);
  } catch (const std::exception& e) {
    spdlog::error("http: handler threw: {}", e.what());
    responder.send(http::error_response(500, "internal error"));
  } catch (...) {
    spdlog::error("http: handler threw a non-exception");
    responder.send(http::error_response(500, "internal error"));
  }
}

void HttpServer::Impl::on_closed(http::Connection& connection) {
  if (connection.counted()) {
    --open_connections_;
    stats_.connection_closed();
  }
  connections_.erase(connection.id());  // destroys it: its handles are closed
  maybe_finish();
}

void HttpServer::Impl::on_wake() {
  auto [deliveries, stop] = mailbox_->take();
  for (auto& d : deliveries) {
    auto it = connections_.find(d.connection_id);
    if (it == connections_.end()) {
      // A handler that never got its connection still hears that it is gone.
      if (!d.ws && d.response.upgrade) d.response.upgrade->on_gone("the connection closed before its answer");
      continue;
    }
    if (d.ws) it->second->deliver_ws(std::move(*d.ws));
    else it->second->deliver(d.request_seq, std::move(d.response));
  }
  if (stop && !stopping_) begin_stop(*stop);
}

void HttpServer::Impl::begin_stop(std::chrono::milliseconds drain) {
  stopping_ = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&tick_timer_), nullptr);  // a draining server is not healthy
  for (auto& l : listeners_) uv_close(&l->handle, nullptr);
  if (unix_bound_) ::unlink(options_.unix_path.c_str());
  unix_bound_ = false;
  for (auto& entry : connections_) entry.second->begin_drain();
  uv_timer_start(&drain_timer_, [](uv_timer_t* t) {
    auto* self = static_cast<Impl*>(t->loop->data);
    for (auto& entry : self->connections_) entry.second->close();  // the deadline has passed
  }, static_cast<std::uint64_t>(drain.count() > 0 ? drain.count() : 0), 0);
  maybe_finish();
}

// The loop ends once nothing is left: close the last handles so uv_run returns.
void HttpServer::Impl::maybe_finish() {
  if (!stopping_ || finished_ || !connections_.empty()) return;
  finished_ = true;
  mailbox_->close();
  uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&drain_timer_), nullptr);
}

void HttpServer::Impl::stop(std::chrono::milliseconds drain) {
  {
    std::lock_guard<std::mutex> lock(lifecycle_mu_);
    if (!started_ || stopped_) return;
    stopped_ = true;
  }
  mailbox_->request_stop(drain);
  thread_.join();
  if (int rc = uv_loop_close(&loop_); rc < 0) spdlog::error("http: uv_loop_close: {}", uv_strerror(rc));
  listeners_.clear();
}

// ---- HttpServer ------------------------------------------------------------

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
HttpServer::~HttpServer() { impl_->stop(std::chrono::milliseconds(0)); }
void HttpServer::start(Handler handler) { impl_->start(std::move(handler)); }
int HttpServer::port() const { return impl_->port(); }
void HttpServer::stop(std::chrono::milliseconds drain) { impl_->stop(drain); }
HttpStats HttpServer::stats() const { return impl_->stats(); }

}  // namespace corepool
