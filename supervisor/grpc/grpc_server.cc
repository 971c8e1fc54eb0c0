// gRPC server lifecycle and the accept loop for a socket-activated listener;
// see grpc_server.h.
#include "supervisor/grpc/grpc_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <spdlog/spdlog.h>

#include "supervisor/grpc/grpc_service.h"

namespace corepool {

GrpcPlan grpc_plan(const Config& config, const std::vector<ListenFd>& inherited) {
  GrpcPlan plan;
  plan.options.max_message_bytes = config.grpc_max_message_mb << 20;  // <= 2047 MB: fits an int
  plan.options.stream_backlog = size_t(config.grpc_stream_backlog);
  if (inherited.empty()) {
    plan.options.listen = config.grpc_listen;
    plan.enabled = !config.grpc_listen.empty();
    return plan;
  }
  for (const ListenFd& l : inherited) {
    if (l.name == "grpc") plan.options.inherited_fd = l.fd;
  }
  plan.enabled = plan.options.inherited_fd >= 0;
  return plan;
}

GrpcServer::GrpcServer(triton::Service& service, GrpcOptions options)
    : service_(service), options_(std::move(options)) {}

GrpcServer::~GrpcServer() {
  if (!stopped_) stop(std::chrono::milliseconds(0));
}

void GrpcServer::start() {
  rpcs_ = std::make_unique<grpc_api::InferenceService>(service_, options_.doors, options_.streams,
                                                       options_.stream_backlog);
  grpc::ServerBuilder builder;
  if (!options_.listen.empty()) builder.AddListeningPort(options_.listen, grpc::InsecureServerCredentials(), &port_);
  // gRPC binds with SO_REUSEPORT by default: a second server on the same port
  // would then share it silently instead of failing to start.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  builder.RegisterService(rpcs_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || (!options_.listen.empty() && port_ == 0)) {
    server_.reset();
    throw std::runtime_error("gRPC: cannot listen on " + options_.listen + " (serve.grpc_listen / --grpc-listen)");
  }
  if (options_.inherited_fd < 0) return;
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw std::runtime_error(std::string("gRPC: eventfd() failed: ") + std::strerror(errno));
  acceptor_ = std::thread([this] { accept_loop(); });
}

std::string GrpcServer::where() const {
  std::string w;
  if (!options_.listen.empty()) {
    const std::string host = options_.listen.substr(0, options_.listen.rfind(':'));
    w = "grpc://" + host + ":" + std::to_string(port_);
  }
  if (options_.inherited_fd >= 0) w += std::string(w.empty() ? "" : " and ") + "the \"grpc\" socket from systemd";
  return w;
}

// Each connection on the inherited listener becomes one of the server's
// channels. Ends when wake_fd_ is signalled.
void GrpcServer::accept_loop() {
  bool warned = false;
  for (;;) {
    pollfd fds[2] = {{options_.inherited_fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int n = ::poll(fds, 2, warned ? 100 : -1);
    if (n < 0 && errno != EINTR) {
      spdlog::error("gRPC: poll() on the socket from systemd failed: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    if (n <= 0 || !(fds[0].revents & POLLIN)) continue;
    const int conn = ::accept4(options_.inherited_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        if (!warned) spdlog::warn("gRPC: accept() on the socket from systemd: {}; retrying", std::strerror(errno));
        warned = true;  // poll with a timeout from now on: the listener stays readable
      }
      continue;  // EAGAIN, ECONNABORTED, EINTR: the next one
    }
    warned = false;
    const int one = 1;
    ::setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // fails harmlessly on a Unix socket
    grpc::AddInsecureChannelFromFd(server_.get(), conn);               // takes the fd
  }
}

void GrpcServer::stop(std::chrono::milliseconds drain) {
  if (stopped_) return;
  stopped_ = true;
  if (acceptor_.joinable()) {
    const uint64_t one = 1;
    if (::write(wake_fd_, &one, sizeof(one)) < 0) spdlog::warn("gRPC: cannot wake the accept thread");
    acceptor_.join();
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (options_.inherited_fd >= 0) ::close(options_.inherited_fd);
  if (!server_) return;
  // New calls are refused at once; calls in flight get until the deadline,
  // then are cancelled (OnCancel -> InferCall::cancel) and Shutdown returns
  // once every reactor is done.
  server_->Shutdown(std::chrono::system_clock::now() + drain);
  server_->Wait();
  server_.reset();
}

}  // namespace corepool
