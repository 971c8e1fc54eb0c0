// WebhookSink: see webhook_sink.h. A blocking socket per POST, every step
// bounded by kTimeoutMs (non-blocking connect + poll, SO_SNDTIMEO /
// SO_RCVTIMEO); the back-off wait is a condition variable that stop wakes.
#include "supervisor/sources/webhook_sink.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "supervisor/sources/backoff.h"

namespace corepool {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// A connected socket, or "" in `error` saying why not.
int connect_to(const WebhookUrl& to, int timeout_ms, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(to.host.c_str(), to.port.c_str(), &hints, &found); rc != 0) {
    error = std::string("cannot resolve ") + to.host + ": " + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc < 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, timeout_ms) == 1 ? 0 : -1;
      int so_error = rc == 0 ? 0 : ETIMEDOUT;
      socklen_t len = sizeof so_error;
      if (rc == 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
      if (so_error != 0) {
        errno = so_error;
        rc = -1;
      }
    }
    if (rc < 0) {
      error = std::string("cannot connect to ") + to.host + ":" + to.port + ": " + std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return -1;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

}  // namespace

WebhookSink::WebhookSink(const std::string& url, double backoff_s, double backoff_max_s)
    : url_(url), target_(parse_webhook_url(url)), backoff_s_(backoff_s), backoff_max_s_(backoff_max_s) {
  thread_ = std::thread([this] { run(); });
}

WebhookSink::~WebhookSink() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  thread_.join();
  if (!queue_.empty()) spdlog::warn("events: {} line(s) for {} dropped at stop", queue_.size(), url_);
  failed_ += queue_.size();
}

void WebhookSink::write(const std::string& line, std::time_t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.size() >= kQueueLines) {
    if (failed_++ == 0) spdlog::warn("events: {} is behind by {} lines: dropping", url_, kQueueLines);
    return;
  }
  queue_.push_back(line);
  cv_.notify_all();
}

uint64_t WebhookSink::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

uint64_t WebhookSink::delivered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return delivered_;
}

// One line at a time, in order: a line that fails is retried (after the
// back-off) before the next goes.
void WebhookSink::run() {
  Backoff backoff(backoff_s_, backoff_max_s_);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const std::string body = queue_.front();
    lock.unlock();
    bool refused = false;
    const std::string error = post(body, refused);
    lock.lock();
    if (error.empty() || refused) {
      queue_.pop_front();
      (error.empty() ? delivered_ : failed_) += 1;
      backoff.reset();
    }
    if (error != last_error_ && !error.empty()) spdlog::warn("events: POST {}: {}", url_, error);
    last_error_ = error;
    if (error.empty() || refused) continue;
    const auto wait = std::chrono::duration<double>(backoff.next());
    if (cv_.wait_for(lock, wait, [this] { return stop_; })) return;
  }
}

std::string WebhookSink::post(const std::string& body, bool& refused) {
  std::string error;
  Fd sock{connect_to(target_, kTimeoutMs, error)};
  if (sock.fd < 0) return error;
  const std::string host = target_.host.find(':') != std::string::npos ? "[" + target_.host + "]" : target_.host;
  const std::string request = "POST " + target_.path + " HTTP/1.1\r\nHost: " + host + ":" + target_.port +
                              "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                              "\r\nConnection: close\r\n\r\n" + body;
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(sock.fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::string("send: ") + std::strerror(errno);
    sent += size_t(n);
  }
  std::string answer;
  char buffer[512];
  while (answer.find("\r\n") == std::string::npos && answer.size() < 4096) {
    const ssize_t n = ::recv(sock.fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? "the connection closed before an answer" : std::string("recv: ") + std::strerror(errno);
    answer.append(buffer, size_t(n));
  }
  const std::string status_line = answer.substr(0, answer.find("\r\n"));
  if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12) return "not an HTTP answer: " + status_line;
  const char code = status_line[9];
  if (code == '2') return "";
  refused = code == '4';
  return "answered " + status_line.substr(9);
}

std::unique_ptr<EventSink> make_webhook_sink(const std::string& url, double backoff_s, double backoff_max_s) {
  return std::make_unique<WebhookSink>(url, backoff_s, backoff_max_s);
}

}  // namespace corepool
