// A blocking HTTP/1.1 client over one keep-alive TCP connection to
// 127.0.0.1, for the soak benchmark's load threads and its /metrics sampler.
// One object per thread; it reconnects when the server closed the connection.
// Answers must carry Content-Length (corepool serve always sends it).
#pragma once

#include <string>

namespace soak {

struct HttpAnswer {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  // `timeout_s`: the longest wait for any read or write before request() throws.
  HttpClient(int port, int timeout_s);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Throws std::runtime_error (naming the path) on connection or protocol errors.
  HttpAnswer request(const std::string& method, const std::string& path, const std::string& body = "",
                     const std::string& content_type = "application/octet-stream");

 private:
  void connect_once();
  void send_all(const std::string& head, const std::string& body);
  std::string read_head();
  std::string read_exactly(size_t n);

  const int port_;
  const int timeout_s_;
  int fd_ = -1;
  std::string buffered_;  // bytes read past the previous answer (none with our usage)
};

}  // namespace soak
