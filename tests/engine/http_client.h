// A minimal blocking HTTP/1.1 client over one keep-alive loopback TCP
// connection, for tests that count every request and every answer (the chaos
// test): one request written, exactly one response read (Content-Length
// bodies only, as corepool serve sends them). Header-only, engine tests.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <string>

namespace corepool::testing {

struct HttpReply {
  int status = 0;     // 0: no complete response (see error)
  std::string body;
  std::string error;  // what went wrong on the connection
};

class HttpClient {
 public:
  // Connects to 127.0.0.1:port; a failed read or write gives up after `timeout_s`.
  explicit HttpClient(int port, int timeout_s = 120) : port_(port), timeout_s_(timeout_s) { connect_now(); }
  ~HttpClient() { close_now(); }
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpReply post(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
    return exchange("POST " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/octet-stream\r\n" +
                    extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  }
  HttpReply get(const std::string& path) { return exchange("GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n"); }

  // True when bytes arrived that no request asked for (a second answer).
  bool unsolicited_bytes() {
    if (!buffer_.empty()) return true;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    char c;
    return ::recv(fd_, &c, 1, MSG_PEEK) > 0;
  }

  // After a connection error: a fresh connection for the next request.
  void reconnect() {
    close_now();
    connect_now();
  }

 private:
  void connect_now() {
    buffer_.clear();
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{timeout_s_, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  void close_now() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  HttpReply exchange(const std::string& request) {
    HttpReply r;
    if (!connected_) return fail(r, "not connected");
    for (size_t sent = 0; sent < request.size();) {
      const ssize_t n = ::send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return fail(r, "send failed");
      sent += static_cast<size_t>(n);
    }
    size_t end = 0;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return fail(r, "connection closed before the headers");
    }
    const std::string head = lower(buffer_.substr(0, end));
    if (head.rfind("http/1.1 ", 0) != 0) return fail(r, "not an HTTP/1.1 status line: " + head.substr(0, 40));
    r.status = std::atoi(head.c_str() + 9);
    const size_t cl = head.find("\r\ncontent-length:");
    const size_t length = cl == std::string::npos ? 0 : std::strtoul(head.c_str() + cl + 17, nullptr, 10);
    while (buffer_.size() < end + 4 + length) {
      if (!fill()) return fail(r, "connection closed mid-body");
    }
    r.body = buffer_.substr(end + 4, length);
    buffer_.erase(0, end + 4 + length);
    return r;
  }
  bool fill() {
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }
  HttpReply& fail(HttpReply& r, const std::string& why) {
    r.status = 0;
    r.error = why;
    connected_ = false;
    return r;
  }
  static std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  int port_;
  int timeout_s_;
  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

}  // namespace corepool::testing
