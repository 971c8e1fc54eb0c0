// The retry on a reused connection covers one race only: the server closing an
// idle keep-alive connection just as we send on it (EOF before any answer byte).
#include "bench/soak_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace soak {
namespace {

// Thrown when the peer closed before sending any byte of the answer.
struct ClosedBeforeAnswer : std::runtime_error {
  ClosedBeforeAnswer() : std::runtime_error("connection closed by the server") {}
};

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Content-Length of a response head; -1 when absent.
long content_length(const std::string& head) {
  std::string lower = head;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t at = lower.find("\r\ncontent-length:");
  if (at == std::string::npos) return -1;
  return std::atol(lower.c_str() + at + 17);
}

}  // namespace

HttpClient::HttpClient(int port, int timeout_s) : port_(port), timeout_s_(timeout_s) {}

HttpClient::~HttpClient() {
  if (fd_ >= 0) ::close(fd_);
}

void HttpClient::connect_once() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(errno_text("socket()"));
  const timeval tv{timeout_s_, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string why = errno_text(("connect() to 127.0.0.1:" + std::to_string(port_)).c_str());
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error(why);
  }
  buffered_.clear();
}

void HttpClient::send_all(const std::string& head, const std::string& body) {
  for (const std::string* part : {&head, &body}) {
    for (size_t sent = 0; sent < part->size();) {
      const ssize_t n = ::send(fd_, part->data() + sent, part->size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EPIPE) throw ClosedBeforeAnswer();
      if (n < 0) throw std::runtime_error(errno_text("send()"));
      sent += static_cast<size_t>(n);
    }
  }
}

std::string HttpClient::read_head() {
  char buf[65536];
  for (;;) {
    const size_t end = buffered_.find("\r\n\r\n");
    if (end != std::string::npos) {
      std::string head = buffered_.substr(0, end + 4);
      buffered_.erase(0, end + 4);
      return head;
    }
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && buffered_.empty()) throw ClosedBeforeAnswer();
    if (n == 0) throw std::runtime_error("connection closed inside the answer's head");
    if (n < 0 && errno == ECONNRESET && buffered_.empty()) throw ClosedBeforeAnswer();
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      throw std::runtime_error("no answer within " + std::to_string(timeout_s_) + " s");
    }
    if (n < 0) throw std::runtime_error(errno_text("recv()"));
    buffered_.append(buf, static_cast<size_t>(n));
  }
}

std::string HttpClient::read_exactly(size_t n) {
  const size_t taken = std::min(n, buffered_.size());
  std::string out = buffered_.substr(0, taken);
  buffered_.erase(0, taken);
  out.resize(n);
  for (size_t got = taken; got < n;) {
    const ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) throw std::runtime_error("connection closed inside the answer's body");
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      throw std::runtime_error("answer's body stalled for " + std::to_string(timeout_s_) + " s");
    }
    if (r < 0) throw std::runtime_error(errno_text("recv() of the answer's body"));
    got += static_cast<size_t>(r);
  }
  return out;
}

HttpAnswer HttpClient::request(const std::string& method, const std::string& path, const std::string& body,
                               const std::string& content_type) {
  std::string head = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!body.empty()) {
    head += "Content-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  head += "\r\n";
  for (int attempt = 0;; ++attempt) {
    const bool reused = fd_ >= 0;
    try {
      if (fd_ < 0) connect_once();
      send_all(head, body);
      const std::string answer_head = read_head();
      HttpAnswer answer;
      if (answer_head.rfind("HTTP/1.", 0) != 0 || answer_head.size() < 12) {
        throw std::runtime_error("not an HTTP answer: " + answer_head.substr(0, 40));
      }
      answer.status = std::atoi(answer_head.c_str() + 9);
      const long length = content_length(answer_head);
      if (length < 0) throw std::runtime_error("answer without Content-Length");
      answer.body = read_exactly(static_cast<size_t>(length));
      return answer;
    } catch (const ClosedBeforeAnswer&) {
      ::close(fd_);
      fd_ = -1;
      if (!reused || attempt > 0) throw std::runtime_error(method + " " + path + ": connection closed by the server");
    } catch (const std::exception& e) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = -1;
      throw std::runtime_error(method + " " + path + ": " + e.what());
    }
  }
}

}  // namespace soak
