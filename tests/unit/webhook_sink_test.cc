// Unit tests for a [[source]]'s webhook sink (supervisor/sources/
// webhook_sink.h) against a receiver on loopback written here: lines are
// POSTed as JSON in order, a 5xx is retried after the back-off until it goes
// through, a 4xx is dropped and counted, a receiver that is down never makes
// write() wait and a full queue drops and counts. And the URL's checks.
#include "supervisor/sources/webhook_sink.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/wait.h"

namespace corepool {
namespace {

// Answers each POST with the next of `codes` (the last one repeats) and keeps the requests.
class Receiver {
 public:
  explicit Receiver(std::vector<int> codes) : codes_(std::move(codes)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~Receiver() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url(const std::string& path = "/hook") const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void run() {
    for (size_t n = 0;; ++n) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string request;
      char buffer[4096];
      for (;;) {  // headers, then Content-Length bytes
        const size_t end = request.find("\r\n\r\n");
        if (end != std::string::npos) {
          const size_t cl = request.find("Content-Length: ");
          const size_t length = cl == std::string::npos ? 0 : std::stoul(request.substr(cl + 16));
          if (request.size() >= end + 4 + length) break;
        }
        const ssize_t got = ::recv(c, buffer, sizeof buffer, 0);
        if (got <= 0) break;
        request.append(buffer, size_t(got));
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(request);
      }
      const int code = codes_[std::min(n, codes_.size() - 1)];
      const std::string answer = "HTTP/1.1 " + std::to_string(code) + " X\r\nContent-Length: 0\r\n\r\n";
      ::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }

  const std::vector<int> codes_;
  int fd_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

std::string body_of(const std::string& request) { return request.substr(request.find("\r\n\r\n") + 4); }

TEST(WebhookSink, EachLineIsPostedAsJsonInOrder) {
  Receiver receiver({200});
  WebhookSink sink(receiver.url(), 0.01, 0.05);
  for (int i = 0; i < 3; ++i) sink.write("{\"n\":" + std::to_string(i) + "}", 0);
  ASSERT_TRUE(testing::wait_until([&] { return sink.delivered() == 3; }, std::chrono::seconds(10)));
  const auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].rfind("POST /hook HTTP/1.1\r\n", 0), 0u) << requests[0];
  EXPECT_THAT(requests[0], ::testing::HasSubstr("Content-Type: application/json\r\n"));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(body_of(requests[i]), "{\"n\":" + std::to_string(i) + "}");
  EXPECT_EQ(sink.failed(), 0u);
}

TEST(WebhookSink, AFailedPostIsRetriedUntilItGoesThroughAndA4xxIsDroppedAndCounted) {
  Receiver receiver({503, 503, 200, 400, 200});
  WebhookSink sink(receiver.url(), 0.01, 0.05);
  sink.write("{\"a\":1}", 0);  // 503, 503, 200
  sink.write("{\"b\":2}", 0);  // 400: refused, not retried
  sink.write("{\"c\":3}", 0);  // 200
  ASSERT_TRUE(testing::wait_until([&] { return sink.delivered() == 2 && sink.failed() == 1; }, std::chrono::seconds(10)))
      << sink.delivered() << " delivered, " << sink.failed() << " failed";
  std::vector<std::string> bodies;
  for (const auto& r : receiver.requests()) bodies.push_back(body_of(r));
  EXPECT_EQ(bodies, (std::vector<std::string>{"{\"a\":1}", "{\"a\":1}", "{\"a\":1}", "{\"b\":2}", "{\"c\":3}"}));
}

TEST(WebhookSink, AReceiverThatIsDownFillsTheQueueThenLinesAreDroppedAndCounted) {
  int port = 0;
  {
    Receiver gone({200});  // a port nobody listens on once it is gone
    port = std::stoi(gone.url().substr(17, gone.url().find('/', 17) - 17));
  }
  auto sink = std::make_unique<WebhookSink>("http://127.0.0.1:" + std::to_string(port) + "/", 0.01, 0.05);
  for (size_t i = 0; i < WebhookSink::kQueueLines + 10; ++i) sink->write("{}", 0);
  EXPECT_EQ(sink->failed(), 10u);  // the line being retried stays first in the queue
  EXPECT_EQ(sink->delivered(), 0u);
  sink.reset();  // the stop drops what is queued, counted (and logged)
}

TEST(WebhookUrl, HostPortAndPathAreTakenApartAndBadOnesNamed) {
  const WebhookUrl u = parse_webhook_url("http://127.0.0.1:9000/a/b?c=d");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, "9000");
  EXPECT_EQ(u.path, "/a/b?c=d");
  const WebhookUrl d = parse_webhook_url("http://hooks.example");
  EXPECT_EQ(d.port, "80");
  EXPECT_EQ(d.path, "/");
  EXPECT_EQ(parse_webhook_url("http://[::1]:81/x").host, "::1");
  EXPECT_THROW(parse_webhook_url("https://x/"), std::invalid_argument);
  EXPECT_THROW(parse_webhook_url("http://:80/"), std::invalid_argument);
  EXPECT_THROW(parse_webhook_url("http://x:99999/"), std::invalid_argument);
  EXPECT_THROW(parse_webhook_url("http://x/a b"), std::invalid_argument);
}

}  // namespace
}  // namespace corepool
