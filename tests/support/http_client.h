// The one HTTP/1.1 client of the tests: blocking, over one keep-alive
// connection to 127.0.0.1:port or a Unix socket. Raw bytes out (send), one
// response in (read_reply: status, lower-cased headers, Content-Length body),
// or both at once (get, post). Every read and write gives up after the
// timeout, so no test hangs on a server. Header-only, no LibTorch.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace corepool::testing {

struct HttpReply {
  int status = 0;                              // 0: no complete response (see error)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string error;                           // what went wrong on the connection
};

class HttpClient {
 public:
  // Connects to 127.0.0.1:port; check connected().
  explicit HttpClient(int port, int timeout_s = 120) : port_(port), timeout_s_(timeout_s) { connect_now(); }
  // Connects to the Unix socket at `path`.
  explicit HttpClient(const std::string& unix_path, int timeout_s = 120)
      : unix_path_(unix_path), timeout_s_(timeout_s) {
    connect_now();
  }
  ~HttpClient() { close_now(); }
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // A connected client, or nullptr when the connect fails.
  static std::unique_ptr<HttpClient> tcp(int port, int timeout_s = 5) {
    auto c = std::make_unique<HttpClient>(port, timeout_s);
    return c->connected() ? std::move(c) : nullptr;
  }
  static std::unique_ptr<HttpClient> unix_socket(const std::string& path, int timeout_s = 5) {
    auto c = std::make_unique<HttpClient>(path, timeout_s);
    return c->connected() ? std::move(c) : nullptr;
  }

  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  HttpReply post(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
    return exchange("POST " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/octet-stream\r\n" +
                    extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  }
  HttpReply get(const std::string& path) { return exchange("GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n"); }

  // Writes `bytes` as they are; false if the connection refused them.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // One response (status, headers, Content-Length body); nullopt on EOF,
  // timeout, or bytes that are not an HTTP/1.1 response.
  std::optional<HttpReply> read_reply() {
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return std::nullopt;
    }
    if (buffer_.compare(0, 9, "HTTP/1.1 ") != 0) return std::nullopt;
    HttpReply reply;
    const std::string head = buffer_.substr(0, end + 2);
    reply.status = std::atoi(head.c_str() + 9);
    for (size_t pos = head.find("\r\n") + 2; pos < head.size();) {
      const size_t eol = head.find("\r\n", pos), colon = head.find(':', pos);
      if (colon > eol) return std::nullopt;
      std::string name = head.substr(pos, colon - pos);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const size_t value = head.find_first_not_of(' ', colon + 1);
      reply.headers[name] = head.substr(value, eol - value);
      pos = eol + 2;
    }
    const auto cl = reply.headers.find("content-length");
    const size_t length = cl == reply.headers.end() ? 0 : std::strtoul(cl->second.c_str(), nullptr, 10);
    while (buffer_.size() < end + 4 + length) {
      if (!fill()) return std::nullopt;
    }
    reply.body = buffer_.substr(end + 4, length);
    buffer_.erase(0, end + 4 + length);
    return reply;
  }

  // True when bytes arrived that no request asked for (a second answer).
  bool unsolicited_bytes() {
    if (!buffer_.empty()) return true;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    char c;
    return ::recv(fd_, &c, 1, MSG_PEEK) > 0;
  }

  // True when the server closed the connection (EOF or reset) before the timeout.
  bool closed_by_server() {
    char c;
    ssize_t n;
    do n = ::recv(fd_, &c, 1, 0);
    while (n > 0);
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }

  // Vanish abruptly: RST instead of FIN.
  void reset() {
    linger lg{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close_now();
  }

  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }

  // After a connection error: a fresh connection for the next request.
  void reconnect() {
    close_now();
    connect_now();
  }

 private:
  void connect_now() {
    buffer_.clear();
    const bool tcp = unix_path_.empty();
    fd_ = ::socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{timeout_s_, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (tcp) {
      const int one = 1;
      ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port_));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    } else {
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::strncpy(addr.sun_path, unix_path_.c_str(), sizeof(addr.sun_path) - 1);
      connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    }
  }
  void close_now() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  HttpReply exchange(const std::string& request) {
    if (!connected_) return fail("not connected");
    if (!send(request)) return fail("send failed");
    std::optional<HttpReply> reply = read_reply();
    return reply ? *reply : fail("no complete HTTP/1.1 response");
  }
  bool fill() {
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }
  HttpReply fail(const std::string& why) {
    connected_ = false;
    HttpReply r;
    r.error = why;
    return r;
  }

  int port_ = 0;
  std::string unix_path_;
  int timeout_s_;
  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

}  // namespace corepool::testing
