// Unit tests for supervisor/http/http_server.h over real sockets: the tests'
// HttpClient on 127.0.0.1 (ephemeral port) or a Unix socket in a TempDir.
// Every client read has a 5 s SO_RCVTIMEO, so no test can hang. The fixture
// owns the server and the temp dir, and ends with a leak check: after the
// server is destroyed the process has exactly the fds it had before.
#include "supervisor/http/http_server.h"

#include <dirent.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <uv.h>

#include <atomic>
#include <functional>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/fd_count.h"
#include "tests/support/http_client.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using testing::HttpClient;
using testing::HttpReply;

constexpr auto kDeadline = 5s;

std::string get(const std::string& target, const std::string& extra = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: test\r\n" + extra + "\r\n";
}

std::string post(const std::string& body) {
  return "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Answers {"method", "target", "body"} at once.
void echo(HttpRequest&& request, Responder responder) {
  HttpResponse response;
  response.body = json{{"method", request.method}, {"target", request.target}, {"body", request.body}}.dump();
  responder.send(std::move(response));
}

// The server exposes some events only through stats(): wait on them with a deadline.
bool eventually(const std::function<bool()>& pred) { return testing::wait_until(pred, kDeadline); }

// Responders handed from the loop thread to the test thread.
class ResponderQueue {
 public:
  void push(Responder r) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(r));
    cv_.notify_all();
  }
  std::optional<Responder> pop() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, kDeadline, [&] { return !queue_.empty(); })) return std::nullopt;
    Responder r = queue_.front();
    queue_.pop_front();
    return r;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Responder> queue_;
};

HttpResponse text(std::string body) {
  HttpResponse response;
  response.content_type = "text/plain";
  response.body = std::move(body);
  return response;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // libuv opens a process-wide pipe (its signal lock) with the first loop and
    // keeps it; open it before counting so that it is not mistaken for a leak.
    static const bool warmed = [] {
      uv_loop_t loop;
      uv_loop_init(&loop);
      uv_loop_close(&loop);
      return true;
    }();
    (void)warmed;
    fds_before_ = testing::open_fd_count();
  }

  void TearDown() override {
    server_.reset();
    EXPECT_EQ(testing::open_fd_count(), fds_before_) << "file descriptors leaked";
  }

  static HttpServerOptions local() {
    HttpServerOptions options;
    options.tcp_port = 0;
    return options;
  }

  HttpServer& serve(HttpServerOptions options, HttpServer::Handler handler) {
    server_ = std::make_unique<HttpServer>(std::move(options));
    server_->start(std::move(handler));
    return *server_;
  }

  std::unique_ptr<HttpClient> connect() { return HttpClient::tcp(server_->port()); }

  std::unique_ptr<HttpServer> server_;
  int fds_before_ = 0;
  testing::TempDir temp_{"corepool-http"};
  const fs::path dir_ = temp_.path();
};

TEST_F(HttpServerTest, GetIsAnsweredWithTheHandlersJsonAndCounted) {
  serve(local(), echo);
  auto client = connect();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send(get("/v2/health/live")));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->headers["content-type"], "application/json");
  EXPECT_EQ(json::parse(reply->body)["target"], "/v2/health/live");
  HttpStats stats = server_->stats();
  EXPECT_EQ(stats.requests, 1u);
  EXPECT_EQ(stats.responses_by_status[200], 1u);
  EXPECT_EQ(stats.connections_open, 1u);
  EXPECT_GT(stats.bytes_received, 0u);
  // Counted in the write callback, which may run after the client has read.
  EXPECT_TRUE(eventually([&] { return server_->stats().bytes_sent > reply->body.size(); }));
}

TEST_F(HttpServerTest, PortZeroBindsARealPort) {
  serve(local(), echo);
  EXPECT_GT(server_->port(), 0);
  auto client = connect();
  ASSERT_TRUE(client);
}

TEST_F(HttpServerTest, BusyPortFailsWithContext) {
  serve(local(), echo);
  HttpServerOptions options = local();
  options.tcp_port = server_->port();
  HttpServer second(options);
  try {
    second.start(echo);
    FAIL() << "start() on a busy port did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot listen on 127.0.0.1:" + std::to_string(server_->port()) + ": address already in use");
  }
}

TEST_F(HttpServerTest, KeepAliveConnectionServesTwoRequests) {
  serve(local(), echo);
  auto client = connect();
  ASSERT_TRUE(client);
  for (const char* target : {"/one", "/two"}) {
    ASSERT_TRUE(client->send(get(target)));
    auto reply = client->read_reply();
    ASSERT_TRUE(reply) << target;
    EXPECT_EQ(json::parse(reply->body)["target"], target);
    EXPECT_EQ(reply->headers.count("connection"), 0u);
  }
  EXPECT_EQ(server_->stats().connections_accepted, 1u);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrderOneAtATime) {
  ResponderQueue held;
  std::vector<std::string> targets;
  std::mutex mu;
  serve(local(), [&](HttpRequest&& request, Responder responder) {
    {
      std::lock_guard<std::mutex> lock(mu);
      targets.push_back(request.target);
    }
    held.push(responder);
  });
  auto client = connect();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send(get("/a") + get("/b")));
  auto first = held.pop();
  ASSERT_TRUE(first);
  EXPECT_EQ(held.size(), 0u) << "the second request was parsed before the first was answered";
  first->send(text("a"));
  auto second = held.pop();
  ASSERT_TRUE(second);
  second->send(text("b"));
  auto reply_a = client->read_reply(), reply_b = client->read_reply();
  ASSERT_TRUE(reply_a && reply_b);
  EXPECT_EQ(reply_a->body, "a");
  EXPECT_EQ(reply_b->body, "b");
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(targets, (std::vector<std::string>{"/a", "/b"}));
}

TEST_F(HttpServerTest, ResponseSentFromAnotherThreadReachesTheClient) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::vector<std::thread> workers;
  std::mutex mu;
  serve(local(), [&](HttpRequest&&, Responder responder) {
    std::lock_guard<std::mutex> lock(mu);
    workers.emplace_back([responder, released] {
      released.wait();  // the latch: the test decides when the answer goes out
      responder.send(text("from a worker"));
    });
  });
  auto client = connect();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send(get("/slow")));
  ASSERT_TRUE(eventually([&] { return server_->stats().requests == 1; }));
  EXPECT_TRUE(server_->stats().responses_by_status.empty());
  release.set_value();
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->body, "from a worker");
  std::lock_guard<std::mutex> lock(mu);
  for (auto& t : workers) t.join();
}

TEST_F(HttpServerTest, ContentLengthBodyReachesTheHandlerIntact) {
  serve(local(), echo);
  std::string body(200000, '\0');
  std::mt19937 rng(7);
  for (char& c : body) c = static_cast<char>('a' + rng() % 26);
  auto client = connect();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send(post(body)));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  auto answer = json::parse(reply->body);
  EXPECT_EQ(answer["method"], "POST");
  EXPECT_EQ(answer["body"], body);
}

TEST_F(HttpServerTest, ChunkedBodyReachesTheHandlerIntact) {
  serve(local(), echo);
  auto client = connect();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                           "5\r\nhello\r\n"));
  ASSERT_TRUE(client->send("6\r\n world\r\n0\r\n\r\n"));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(json::parse(reply->body)["body"], "hello world");
}

TEST_F(HttpServerTest, ExpectContinueIsAnsweredBeforeTheBody) {
  serve(local(), echo);
  auto client = connect();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send("POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"));
  auto interim = client->read_reply();
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(client->send("data"));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(json::parse(reply->body)["body"], "data");
}

void expect_error_and_close(HttpClient& client, int status) {
  auto reply = client.read_reply();
  ASSERT_TRUE(reply) << "no answer, expected " << status;
  EXPECT_EQ(reply->status, status);
  EXPECT_EQ(reply->headers["connection"], "close");
  EXPECT_TRUE(json::parse(reply->body).contains("error")) << reply->body;
  EXPECT_TRUE(client.closed_by_server());
}

TEST_F(HttpServerTest, BodyOverTheLimitIs413AndClosesTheConnection) {
  HttpServerOptions options = local();
  options.max_body_bytes = 1024;
  serve(options, echo);
  auto client = connect();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send(post(std::string(4096, 'x'))));
  expect_error_and_close(*client, 413);
}

TEST_F(HttpServerTest, ChunkedBodyOverTheLimitIs413) {
  HttpServerOptions options = local();
  options.max_body_bytes = 8;
  serve(options, echo);
  auto client = connect();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                           "10\r\n0123456789abcdef\r\n0\r\n\r\n"));
  expect_error_and_close(*client, 413);
}

TEST_F(HttpServerTest, HeadersOverTheLimitAre431) {
  HttpServerOptions options = local();
  options.max_header_bytes = 1024;
  serve(options, echo);
  auto client = connect();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send(get("/", "X-Big: " + std::string(4000, 'a') + "\r\n")));
  expect_error_and_close(*client, 431);
}

TEST_F(HttpServerTest, GarbageIs400AndClosesTheConnection) {
  serve(local(), echo);
  auto client = connect();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send(std::string("\x01\x02 garbage \xff\r\n\r\n", 17)));
  expect_error_and_close(*client, 400);
  EXPECT_EQ(server_->stats().responses_by_status[400], 1u);
}

TEST_F(HttpServerTest, StalledHeadersGet408WithinTheHeaderTimeout) {
  HttpServerOptions options = local();
  options.header_timeout_ms = 300;
  serve(options, echo);
  auto client = connect();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send("GET / HTTP/1.1\r\nHost: t\r\n"));  // and then nothing
  expect_error_and_close(*client, 408);
}

TEST_F(HttpServerTest, StalledBodyGets408WithinTheBodyTimeout) {
  HttpServerOptions options = local();
  options.body_timeout_ms = 300;
  serve(options, echo);
  auto client = connect();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc"));
  expect_error_and_close(*client, 408);
}

// Slowloris: a client that keeps every gap between bytes far below any
// timeout, but never finishes its headers. The header deadline counts from the
// first byte, not the last, so the trickle is cut off with a 408 long before
// the ~4 s the full request would take to arrive.
TEST_F(HttpServerTest, SlowlorisTricklingOneHeaderByteAtATimeIsCutOffAtTheHeaderDeadline) {
  HttpServerOptions options = local();
  options.header_timeout_ms = 300;
  options.idle_timeout_ms = 60000;
  serve(options, echo);
  auto client = connect();
  ASSERT_TRUE(client);
  const std::string request = get("/slow", "X-Pad: " + std::string(160, 'p') + "\r\n");
  std::atomic<size_t> sent{0};
  std::atomic<bool> stop{false};
  std::thread trickler([&] {
    for (char c : request) {  // one byte per 20 ms: pacing, not synchronisation
      if (stop || !client->send(std::string_view(&c, 1))) return;
      ++sent;
      std::this_thread::sleep_for(20ms);
    }
  });
  auto reply = client->read_reply();
  stop = true;
  trickler.join();
  ASSERT_TRUE(reply) << "no answer while trickling";
  EXPECT_EQ(reply->status, 408);
  EXPECT_LT(sent.load(), request.size()) << "the whole request got through";
  EXPECT_TRUE(client->closed_by_server());
  EXPECT_EQ(server_->stats().requests, 0u);
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionIsClosedAfterTheIdleTimeout) {
  HttpServerOptions options = local();
  options.idle_timeout_ms = 300;
  serve(options, echo);
  auto client = connect();
  ASSERT_TRUE(client && client->send(get("/once")));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_TRUE(client->closed_by_server()) << "idle connection still open after the 5 s read timeout";
  EXPECT_TRUE(eventually([&] { return server_->stats().connections_open == 0; }));
}

// With the default options nothing but this host can connect over TCP: the
// kernel's own table of listening sockets shows 127.0.0.1, not 0.0.0.0.
TEST_F(HttpServerTest, DefaultTcpListenerIsBoundToLoopbackOnly) {
  HttpServerOptions options;
  EXPECT_EQ(options.tcp_host, "127.0.0.1");
  options.tcp_port = 0;
  serve(options, echo);
  char wanted[32];
  std::snprintf(wanted, sizeof(wanted), ":%04X", server_->port());
  std::ifstream table("/proc/net/tcp");
  std::string line, local_address;
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A" && local.size() > 5 && local.compare(local.size() - 5, 5, wanted) == 0) local_address = local;
  }
  EXPECT_EQ(local_address, std::string("0100007F") + wanted) << "listening socket not found or not on loopback";
}

TEST_F(HttpServerTest, ConnectionsOverTheLimitGet503WithRetryAfter) {
  HttpServerOptions options = local();
  options.max_connections = 2;
  serve(options, echo);
  auto first = connect(), second = connect();
  ASSERT_TRUE(first && second);
  for (HttpClient* c : {first.get(), second.get()}) {  // both accepted and counted
    ASSERT_TRUE(c->send(get("/")));
    ASSERT_TRUE(c->read_reply());
  }
  auto third = connect();
  ASSERT_TRUE(third);
  auto reply = third->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 503);
  EXPECT_EQ(reply->headers["retry-after"], "1");
  EXPECT_TRUE(third->closed_by_server());
  EXPECT_EQ(server_->stats().connections_rejected, 1u);
  first.reset();  // a freed slot is usable again
  ASSERT_TRUE(eventually([&] { return server_->stats().connections_open == 1; }));
  auto fourth = connect();
  ASSERT_TRUE(fourth && fourth->send(get("/")));
  auto ok = fourth->read_reply();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, UnixSocketServesWithMode0660AndReplacesAStaleFile) {
  const std::string path = (dir_ / "corepool.sock").string();
  {  // a stale socket file, as a killed server leaves it
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);
  }
  HttpServerOptions options;
  options.tcp_host.clear();
  options.unix_path = path;
  serve(options, echo);
  EXPECT_EQ(server_->port(), 0);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  auto client = HttpClient::unix_socket(path);
  ASSERT_TRUE(client && client->send(get("/unix")));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(json::parse(reply->body)["target"], "/unix");
  client.reset();
  server_->stop(1s);
  EXPECT_FALSE(fs::exists(path)) << "socket file left after stop";
}

TEST_F(HttpServerTest, UnixPathThatIsNotASocketIsLeftAloneAndRefused) {
  const std::string path = (dir_ / "not-a-socket").string();
  { std::ofstream(path) << "precious"; }
  HttpServerOptions options;
  options.tcp_host.clear();
  options.unix_path = path;
  HttpServer server(options);
  EXPECT_THROW(server.start(echo), std::runtime_error);
  EXPECT_TRUE(fs::exists(path));
}

// A group other than our own that we may chown to, so that the chown is
// visible: root may use any group; anyone else one of their supplementary groups.
std::optional<gid_t> some_other_group() {
  if (::geteuid() == 0) {
    for (const char* name : {"nogroup", "daemon", "users", "adm"}) {
      const group* g = ::getgrnam(name);
      if (g != nullptr && g->gr_gid != ::getegid()) return g->gr_gid;
    }
  }
  gid_t groups[256];
  const int n = ::getgroups(256, groups);
  for (int i = 0; i < n; ++i) {
    if (groups[i] != ::getegid()) return groups[i];
  }
  return std::nullopt;
}

TEST_F(HttpServerTest, UnixSocketBelongsToTheConfiguredGroup) {
  const std::optional<gid_t> gid = some_other_group();
  ASSERT_TRUE(gid) << "run as root, or as a user with a supplementary group: the test needs a second group to chown to";
  const std::string path = (dir_ / "corepool.sock").string();
  HttpServerOptions options;
  options.tcp_host.clear();
  options.unix_path = path;
  options.unix_group = ::getgrgid(*gid)->gr_name;
  serve(options, echo);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, *gid);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  auto client = HttpClient::unix_socket(path);
  ASSERT_TRUE(client && client->send(get("/grouped")));
  EXPECT_TRUE(client->read_reply());
}

TEST_F(HttpServerTest, UnknownUnixSocketGroupIsAClearStartupErrorAndLeavesNoSocket) {
  const std::string path = (dir_ / "corepool.sock").string();
  HttpServerOptions options;
  options.tcp_host.clear();
  options.unix_path = path;
  options.unix_group = "corepool-no-such-group";
  HttpServer server(options);
  try {
    server.start(echo);
    ADD_FAILURE() << "start() accepted an unknown group";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot listen on " + path +
                                         ": unknown group 'corepool-no-such-group' (serve.unix_socket_group)");
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(HttpServerTest, StopLetsAnInFlightRequestFinishWithinTheDrain) {
  ResponderQueue held;
  serve(local(), [&](HttpRequest&&, Responder r) { held.push(r); });
  const int port = server_->port();
  auto client = connect();
  ASSERT_TRUE(client && client->send(get("/in-flight")));
  auto responder = held.pop();
  ASSERT_TRUE(responder);
  std::thread stopper([&] { server_->stop(10s); });
  // Stop has begun once the listener is gone.
  EXPECT_TRUE(eventually([&] { return HttpClient::tcp(port) == nullptr; }));
  responder->send(text("finished"));
  auto reply = client->read_reply();
  client.reset();  // spares the server its lingering close
  stopper.join();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->body, "finished");
  EXPECT_EQ(reply->headers["connection"], "close");
}

TEST_F(HttpServerTest, StopCutsOffARequestAtTheDrainDeadline) {
  ResponderQueue held;
  serve(local(), [&](HttpRequest&&, Responder r) { held.push(r); });
  auto client = connect();
  ASSERT_TRUE(client && client->send(get("/never")));
  auto responder = held.pop();
  ASSERT_TRUE(responder);
  server_->stop(50ms);
  EXPECT_TRUE(client->closed_by_server());
  responder->send(text("too late"));  // the server is gone: a no-op
  EXPECT_TRUE(responder->sent());
}

TEST_F(HttpServerTest, ClientThatVanishesBeforeTheResponseLeavesTheServerHealthy) {
  ResponderQueue held;
  serve(local(), [&](HttpRequest&& request, Responder r) {
    if (request.target == "/hold") held.push(r);
    else r.send(text("ok"));
  });
  auto client = connect();
  ASSERT_TRUE(client && client->send(get("/hold")));
  auto responder = held.pop();
  ASSERT_TRUE(responder);
  client->reset();
  ASSERT_TRUE(eventually([&] { return server_->stats().connections_open == 0; }));
  responder->send(text("nobody listens"));  // a no-op
  auto next = connect();
  ASSERT_TRUE(next && next->send(get("/")));
  auto reply = next->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->body, "ok");
  EXPECT_EQ(server_->stats().responses_by_status.count(200), 1u);
  EXPECT_EQ(server_->stats().responses_by_status[200], 1u) << "the vanished client's answer was counted";
}

TEST_F(HttpServerTest, DroppedResponderAnswers500) {
  serve(local(), [](HttpRequest&&, Responder) {});
  auto client = connect();
  ASSERT_TRUE(client && client->send(get("/")));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 500);
  EXPECT_TRUE(json::parse(reply->body).contains("error"));
}

TEST_F(HttpServerTest, ThrowingHandlerAnswers500AndKeepsServing) {
  serve(local(), [](HttpRequest&& request, Responder r) {
    if (request.target == "/throw") throw std::runtime_error("boom");
    r.send(text("ok"));
  });
  auto client = connect();
  ASSERT_TRUE(client && client->send(get("/throw")));
  auto failed = client->read_reply();
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, 500);
  ASSERT_TRUE(client->send(get("/")));
  auto ok = client->read_reply();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, SecondSendIsIgnored) {
  serve(local(), [](HttpRequest&&, Responder r) {
    r.send(text("first"));
    r.send(text("second"));
  });
  auto client = connect();
  ASSERT_TRUE(client && client->send(get("/") + get("/")));
  auto a = client->read_reply(), b = client->read_reply();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->body, "first");
  EXPECT_EQ(b->body, "first");
}

TEST_F(HttpServerTest, ConnectionCloseIsHonoured) {
  serve(local(), echo);
  auto client = connect();
  ASSERT_TRUE(client && client->send(get("/", "Connection: close\r\n")));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->headers["connection"], "close");
  EXPECT_TRUE(client->closed_by_server());
}

TEST_F(HttpServerTest, Http10ClosesUnlessKeepAliveIsAsked) {
  serve(local(), echo);
  auto plain = connect();
  ASSERT_TRUE(plain && plain->send("GET /a HTTP/1.0\r\n\r\n"));
  ASSERT_TRUE(plain->read_reply());
  EXPECT_TRUE(plain->closed_by_server());
  auto kept = connect();
  ASSERT_TRUE(kept && kept->send("GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  auto reply = kept->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->headers["connection"], "keep-alive");
  ASSERT_TRUE(kept->send("GET /c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  EXPECT_TRUE(kept->read_reply());
}

TEST_F(HttpServerTest, HalfClosedClientStillGetsItsAnswer) {
  serve(local(), echo);
  auto client = connect();
  ASSERT_TRUE(client && client->send(get("/half")));
  client->shutdown_write();
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(json::parse(reply->body)["target"], "/half");
  EXPECT_TRUE(client->closed_by_server());
}

TEST_F(HttpServerTest, RandomBytesNeverCrashTheServer) {
  serve(local(), echo);
  std::mt19937 rng(42);
  for (int i = 0; i < 50; ++i) {
    std::string junk = i % 2 ? "GET / HTTP/1.1\r\n" : "";
    for (int n = static_cast<int>(rng() % 300); n > 0; --n) junk.push_back(static_cast<char>(rng()));
    auto client = connect();
    ASSERT_TRUE(client);
    client->send(junk);
    client->shutdown_write();
    EXPECT_TRUE(client->closed_by_server()) << "case " << i;
  }
  auto client = connect();
  ASSERT_TRUE(client && client->send(get("/still-alive")));
  EXPECT_TRUE(client->read_reply());
  EXPECT_TRUE(eventually([&] { return server_->stats().connections_open == 1; }));
}

}  // namespace
}  // namespace corepool

namespace corepool {
namespace {

// Responder::on_close: the handler learns that its client left, once, and
// only while no answer was sent.
class HttpCloseWatchTest : public HttpServerTest {
 protected:
  // Every request is held (not answered) and watched; each close bumps `closed_`.
  void serve_watched() {
    serve(local(), [this](HttpRequest&&, Responder r) {
      r.on_close([this] { ++closed_; });
      held_.push(r);
    });
  }
  ResponderQueue held_;
  std::atomic<int> closed_{0};
};

TEST_F(HttpCloseWatchTest, AClientThatClosesWhileItsRequestIsHeldIsReportedOnce) {
  serve_watched();
  auto client = connect();
  ASSERT_TRUE(client && client->send(get("/slow")));
  auto responder = held_.pop();
  ASSERT_TRUE(responder);
  client.reset();  // close(): FIN
  EXPECT_TRUE(eventually([&] { return closed_.load() == 1; }));
  EXPECT_TRUE(eventually([&] { return server_->stats().connections_open == 0; }));
  responder->send(text("late"));  // the connection is gone: a no-op, no second report
  EXPECT_EQ(closed_.load(), 1);
  EXPECT_EQ(server_->stats().responses_by_status.count(200), 0u);
}

TEST_F(HttpCloseWatchTest, AWatchedRequestTakesAHalfCloseAsLeavingAndSendsNothing) {
  serve_watched();
  auto client = connect();
  ASSERT_TRUE(client && client->send(get("/slow")));
  auto responder = held_.pop();  // held: a dropped Responder would answer 500
  ASSERT_TRUE(responder);
  client->shutdown_write();
  EXPECT_TRUE(eventually([&] { return closed_.load() == 1; }));
  EXPECT_FALSE(client->read_reply());
  EXPECT_TRUE(client->closed_by_server());
}

TEST_F(HttpCloseWatchTest, AnAnsweredRequestIsNeverReportedClosed) {
  serve_watched();
  auto client = connect();
  ASSERT_TRUE(client && client->send(get("/a")));
  auto responder = held_.pop();
  ASSERT_TRUE(responder);
  responder->send(text("done"));
  ASSERT_TRUE(client->read_reply());
  client.reset();
  EXPECT_TRUE(eventually([&] { return server_->stats().connections_open == 0; }));
  EXPECT_EQ(closed_.load(), 0);
}

TEST_F(HttpCloseWatchTest, WatchingAfterTheClientLeftRunsAtOnce) {
  ResponderQueue unwatched;
  serve(local(), [&](HttpRequest&&, Responder r) { unwatched.push(r); });
  auto client = connect();
  ASSERT_TRUE(client && client->send(get("/x")));
  auto responder = unwatched.pop();
  ASSERT_TRUE(responder);
  client->reset();  // RST: the connection closes, nobody watching yet
  EXPECT_TRUE(eventually([&] { return server_->stats().connections_open == 0; }));
  bool ran = false;
  responder->on_close([&] { ran = true; });
  EXPECT_TRUE(ran);
  responder->abandon();
}

}  // namespace
}  // namespace corepool
