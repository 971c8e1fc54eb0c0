// HttpServer's WebSocket upgrade (supervisor/http/http_connection_ws.cc) on
// loopback, without serve: a handler that upgrades every request, a client
// that writes frames by hand. A message is echoed through the WsSender, a
// ping is answered, a close closes, and a client that stops reading costs
// the server at most ws_max_backlog_bytes: later frames are dropped and the
// handler is told each time.
#include "supervisor/http/http_server.h"

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include <gtest/gtest.h>

#include "supervisor/http/websocket_frame.h"
#include "tests/support/http_client.h"
#include "tests/support/wait.h"

namespace corepool {
namespace {

using testing::HttpClient;

// Echoes text messages through its sender; counts what the connection tells it.
class EchoHandler final : public WsHandler {
 public:
  explicit EchoHandler(WsSender sender) : sender_(std::move(sender)) {}
  void on_text(std::string&& text) override { sender_.text("echo: " + text); }
  void on_binary(std::string&& data) override { binary_bytes += data.size(); }
  void on_client_close(std::uint16_t code) override { sender_.close(code == 1005 ? 1000 : code, "bye"); }
  void on_idle() override {}
  void on_server_stop() override { sender_.close(1001, "stopping"); }
  void on_dropped() override { ++dropped; }
  void on_gone(const std::string&) override { gone = true; }

  const WsSender sender_;
  std::atomic<size_t> binary_bytes{0};
  std::atomic<int> dropped{0};
  std::atomic<bool> gone{false};
};

std::string masked(std::uint8_t first, const std::string& payload) {
  std::string f(1, static_cast<char>(first));
  f += static_cast<char>(0x80 | payload.size());  // < 126 bytes here
  const char mask[4] = {1, 2, 3, 4};
  f.append(mask, 4);
  for (size_t i = 0; i < payload.size(); ++i) f += static_cast<char>(payload[i] ^ mask[i & 3]);
  return f;
}

// The next server frame's first byte and payload (payloads under 126 bytes).
std::pair<int, std::string> read_frame(int fd) {
  unsigned char head[2];
  if (::recv(fd, head, 2, MSG_WAITALL) != 2) return {-1, ""};
  std::string payload(head[1] & 0x7F, '\0');
  if (!payload.empty() && ::recv(fd, payload.data(), payload.size(), MSG_WAITALL) != ssize_t(payload.size())) {
    return {-1, ""};
  }
  return {head[0], payload};
}

class HttpWebSocketTest : public ::testing::Test {
 protected:
  void serve(HttpServerOptions options) {
    options.tcp_port = 0;
    server_ = std::make_unique<HttpServer>(std::move(options));
    server_->start([this](HttpRequest&& request, Responder responder) {
      auto handler = std::make_shared<EchoHandler>(responder.websocket());
      {
        std::lock_guard<std::mutex> lock(mu_);
        handler_ = handler;
      }
      HttpResponse r;
      r.status = 101;
      r.content_type.clear();
      r.headers = {{"Upgrade", "websocket"},
                   {"Sec-WebSocket-Accept", ws::accept_key(request.headers["sec-websocket-key"])}};
      r.upgrade = handler;
      responder.send(std::move(r));
    });
  }
  std::unique_ptr<HttpClient> upgraded() {
    auto client = HttpClient::tcp(server_->port());
    if (!client) return nullptr;
    client->send("GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    auto reply = client->read_reply();
    EXPECT_TRUE(reply && reply->status == 101);
    if (!reply) return nullptr;
    EXPECT_EQ(reply->headers["sec-websocket-accept"], "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    EXPECT_EQ(reply->headers["connection"], "Upgrade");
    return client;
  }
  std::shared_ptr<EchoHandler> handler() {
    std::lock_guard<std::mutex> lock(mu_);
    return handler_;
  }

  std::unique_ptr<HttpServer> server_;
  std::mutex mu_;
  std::shared_ptr<EchoHandler> handler_;
};

TEST_F(HttpWebSocketTest, AMessageIsEchoedAPingAnsweredAndACloseClosesTheConnection) {
  serve({});
  auto client = upgraded();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send(masked(0x81, "hi") + masked(0x89, "p")));
  const auto first = read_frame(client->fd()), second = read_frame(client->fd());
  // The pong is written by the loop at once, the echo through the mailbox: either order.
  const auto& echo = first.first == 0x81 ? first : second;
  const auto& pong = first.first == 0x8A ? first : second;
  EXPECT_EQ(echo.first, 0x81);
  EXPECT_EQ(echo.second, "echo: hi");
  EXPECT_EQ(pong.first, 0x8A);
  EXPECT_EQ(pong.second, "p");
  ASSERT_TRUE(client->send(masked(0x88, std::string("\x03\xe8", 2))));
  const auto close = read_frame(client->fd());
  EXPECT_EQ(close.first, 0x88);
  EXPECT_EQ(close.second, std::string("\x03\xe8" "bye", 5));
  EXPECT_TRUE(client->closed_by_server());
  EXPECT_TRUE(testing::wait_until([&] { return handler()->gone.load(); }, std::chrono::seconds(5)));
}

TEST_F(HttpWebSocketTest, AClientThatStopsReadingHasFramesDroppedAndCountedNotBuffered) {
  HttpServerOptions options;
  options.ws_max_backlog_bytes = 64 << 10;
  serve(options);
  auto client = upgraded();
  ASSERT_TRUE(client);
  const int small = 4096;
  ::setsockopt(client->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  ASSERT_TRUE(testing::wait_until([&] { return handler() != nullptr; }, std::chrono::seconds(5)));
  // 64 MiB of text the client never reads: the kernel's buffers fill, then
  // libuv's queue to 64 KiB, then frames are dropped.
  const std::string chunk(60000, 'x');
  for (int i = 0; i < 1100; ++i) handler()->sender_.text(chunk);
  // The loop takes the frames from the mailbox one by one: wait until it has
  // dropped most of them (what the kernel's buffers and 64 KiB hold is a
  // few hundred frames at most, however the kernel sizes its buffers).
  EXPECT_TRUE(testing::wait_until([&] { return handler()->dropped.load() >= 800; }, std::chrono::seconds(10)))
      << "only " << handler()->dropped.load() << " of 1100 frames of 60 kB dropped: the rest were queued";
  // The connection still works: the client's close is answered.
  ASSERT_TRUE(client->send(masked(0x88, "")));
  server_->stop(std::chrono::milliseconds(0));
}

}  // namespace
}  // namespace corepool
