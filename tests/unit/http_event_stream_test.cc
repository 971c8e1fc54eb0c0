// HttpServer's event streams (HttpResponse::event_stream, GET /v2/events'
// Server-Sent Events) on loopback, without serve: the headers go out without
// a Content-Length, then the bytes the handler's sender sends as they come,
// until end() closes; a client that stops reading costs the server at most
// ws_max_backlog_bytes (later messages dropped, the handler told); a handler
// whose connection is gone before its answer still hears on_gone().
#include "supervisor/http/http_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/http_client.h"
#include "tests/support/wait.h"

namespace corepool {
namespace {

using testing::HttpClient;

class Listener final : public WsHandler {
 public:
  explicit Listener(WsSender sender) : sender_(std::move(sender)) {}
  void on_text(std::string&&) override {}
  void on_binary(std::string&&) override {}
  void on_client_close(std::uint16_t) override {}
  void on_idle() override { ++idle; }
  void on_server_stop() override { sender_.end(); }
  void on_dropped() override { ++dropped; }
  void on_gone(const std::string&) override { gone = true; }

  const WsSender sender_;
  std::atomic<int> idle{0};
  std::atomic<int> dropped{0};
  std::atomic<bool> gone{false};
};

// What the server sent until `want` is in it, or the connection closed, or 5 s passed.
std::string read_until(int fd, const std::string& want, std::string got = "") {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (got.find(want) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    got.append(buffer, size_t(n));
  }
  return got;
}

class HttpEventStreamTest : public ::testing::Test {
 protected:
  // `answer_later`: keep the responder instead of answering at once.
  void serve(HttpServerOptions options, bool answer_later = false) {
    options.tcp_port = 0;
    server_ = std::make_unique<HttpServer>(std::move(options));
    server_->start([this, answer_later](HttpRequest&&, Responder responder) {
      auto listener = std::make_shared<Listener>(responder.websocket());
      std::lock_guard<std::mutex> lock(mu_);
      listener_ = listener;
      if (answer_later) {
        responder_.push_back(std::move(responder));
        return;
      }
      responder.send(answer(listener));
    });
  }
  static HttpResponse answer(std::shared_ptr<Listener> listener) {
    HttpResponse r;
    r.content_type = "text/event-stream";
    r.body = ": subscribed\n\n";
    r.event_stream = true;
    r.upgrade = std::move(listener);
    return r;
  }
  std::shared_ptr<Listener> listener() {
    std::lock_guard<std::mutex> lock(mu_);
    return listener_;
  }

  std::unique_ptr<HttpServer> server_;
  std::mutex mu_;
  std::shared_ptr<Listener> listener_;
  std::vector<Responder> responder_;
};

TEST_F(HttpEventStreamTest, HeadersGoOutWithoutALengthThenEachMessageAsItIsSentThenEndCloses) {
  serve({});
  auto client = HttpClient::tcp(server_->port());
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send("GET /v2/events HTTP/1.1\r\nHost: t\r\n\r\n"));
  std::string got = read_until(client->fd(), ": subscribed\n\n");
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("Content-Type: text/event-stream\r\n"), std::string::npos) << got;
  EXPECT_EQ(got.find("Content-Length"), std::string::npos) << got;
  listener()->sender_.raw("event: event\ndata: {\"a\":1}\n\n");
  got = read_until(client->fd(), "data: {\"a\":1}\n\n", got);
  EXPECT_NE(got.find("\r\n\r\n: subscribed\n\nevent: event\ndata: {\"a\":1}\n\n"), std::string::npos) << got;
  listener()->sender_.end();
  EXPECT_TRUE(client->closed_by_server());
  EXPECT_TRUE(testing::wait_until([&] { return listener()->gone.load(); }, std::chrono::seconds(5)));
}

TEST_F(HttpEventStreamTest, AQuietStreamGetsOnIdleAndStaysOpen) {
  HttpServerOptions options;
  options.ws_idle_timeout_ms = 50;
  serve(options);
  auto client = HttpClient::tcp(server_->port());
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send("GET /v2/events HTTP/1.1\r\nHost: t\r\n\r\n"));
  read_until(client->fd(), ": subscribed\n\n");
  EXPECT_TRUE(testing::wait_until([&] { return listener()->idle.load() >= 3; }, std::chrono::seconds(5)));
  EXPECT_FALSE(listener()->gone.load());
  listener()->sender_.raw(": still here\n\n");
  EXPECT_NE(read_until(client->fd(), ": still here\n\n").find(": still here"), std::string::npos);
}

TEST_F(HttpEventStreamTest, AClientThatStopsReadingHasMessagesDroppedAndCountedNotBuffered) {
  HttpServerOptions options;
  options.ws_max_backlog_bytes = 64 << 10;
  serve(options);
  auto client = HttpClient::tcp(server_->port());
  ASSERT_TRUE(client);
  const int small = 4096;
  ::setsockopt(client->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  ASSERT_TRUE(client->send("GET /v2/events HTTP/1.1\r\nHost: t\r\n\r\n"));
  read_until(client->fd(), ": subscribed\n\n");
  const std::string message = "data: " + std::string(60000, 'x') + "\n\n";
  for (int i = 0; i < 1100; ++i) listener()->sender_.raw(message);
  EXPECT_TRUE(testing::wait_until([&] { return listener()->dropped.load() >= 800; }, std::chrono::seconds(10)))
      << "only " << listener()->dropped.load() << " of 1100 messages of 60 kB dropped: the rest were queued";
  server_->stop(std::chrono::milliseconds(0));
}

TEST_F(HttpEventStreamTest, AHandlerWhoseClientLeftBeforeTheAnswerHearsOnGone) {
  serve({}, /*answer_later=*/true);
  {
    auto client = HttpClient::tcp(server_->port());
    ASSERT_TRUE(client);
    ASSERT_TRUE(client->send("GET /v2/events HTTP/1.1\r\nHost: t\r\n\r\n"));
    ASSERT_TRUE(testing::wait_until([&] { return listener() != nullptr; }, std::chrono::seconds(5)));
    client->reset();
  }
  ASSERT_TRUE(testing::wait_until([&] { return server_->stats().connections_open == 0; }, std::chrono::seconds(5)));
  std::lock_guard<std::mutex> lock(mu_);
  responder_.front().send(answer(listener_));
  EXPECT_TRUE(testing::wait_until([&] { return listener_->gone.load(); }, std::chrono::seconds(5)))
      << "the handler never heard that its connection was gone: a subscriber list would keep it forever";
}

}  // namespace
}  // namespace corepool
