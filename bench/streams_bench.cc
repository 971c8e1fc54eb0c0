// corepool-streams-bench: how many real-time 16 kHz audio streams `corepool
// serve` sustains on this machine (issue 38, and issue 39 with Silero VAD),
// thread and process mode, and how long its decisions take. For each stream
// count K it starts K WebSocket clients (/v2/models/NAME/audio/stream, Boost.
// Beast, one asio thread in this process) that each send 16 kHz mono s16le in
// 100 ms frames paced by a steady clock, for --seconds; then {"end": true},
// and each waits for its summary and close 1000. The server's own figures come
// from its /metrics: corepool_stream_decision_seconds (a segment's or chunk's
// last sample in -> its result back; this run's share, the counts after minus
// before) and each stream's corepool_stream_lag_seconds, read half-way and
// just before the end.
//
// K is sustained when every stream opened, ended with its summary and close
// 1000, dropped nothing, its lag at the end is under --lag-bound-s plus the
// model's segment length (a stateless model's events wait for a whole
// segment) and did not grow by a second or more since half-way, and (with
// --p99-bound-ms) the decisions' p99 is under that bound. K doubles from
// --start-k while sustained, then is bisected between the last sustained and
// the first not (to within an eighth). The clients run on the same cpus as the
// server: their own CPU time is measured and printed beside each figure, and a
// run where a client sent a frame more than 0.5 s late says so (the figure is
// then the client's limit, not the server's). Prints figures only; never fails
// on them (exit 1 only when the server could not be started or reached).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include "supervisor/triton/serve_metrics.h"
#include "tools/audio_synth.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using corepool::HistogramCounts;

constexpr int kRate = 16000;
constexpr auto kFrame = std::chrono::milliseconds(100);
constexpr size_t kFrameBytes = kRate / 10 * 2;  // 100 ms of s16le mono
constexpr double kLateLimit = 0.5;              // a client this late sending a frame is the limit itself

struct Options {
  std::string corepool, model, modes = "thread,process", name;
  std::string work = "/tmp";
  double seconds = 20, lag_bound_s = 2, p99_bound_ms = 0;
  int start_k = 8, max_k = 2048, workers = 2;
};

// ---- the server ---------------------------------------------------------------

class Server {
 public:
  Server(const Options& o, const std::string& mode) {
    const std::string base = o.work + "/corepool-streams-bench-" + std::to_string(::getpid());
    config_ = base + ".toml";
    log_ = base + ".log";
    std::ofstream(config_) << "[engine]\nworkers = " << o.workers
                           << "\n[serve]\nmax_streams = 8192\nmax_connections = 8200\nstream_idle_s = 30\n";
    std::vector<std::string> args = {o.corepool, "--log-level", "info", "--config", config_, "serve", "--mode", mode,
                                     "--model", o.model, "--listen", "127.0.0.1:0", "--grpc-listen", ""};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start " + o.corepool + ": " + std::strerror(rc));
    const std::regex listening(R"(on http://127\.0\.0\.1:(\d+))");
    for (const auto deadline = Clock::now() + std::chrono::seconds(600); Clock::now() < deadline;) {
      std::smatch m;
      const std::string text = log_text();
      if (std::regex_search(text, m, listening)) {
        port_ = std::stoi(m[1]);
        return;
      }
      if (int status = 0; ::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("corepool serve exited before listening:\n" + text);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid_, SIGKILL);  // the destructor does not run for a constructor that throws
    ::waitpid(pid_, nullptr, 0);
    throw std::runtime_error("corepool serve did not listen within 600 s:\n" + log_text());
  }
  ~Server() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    std::remove(config_.c_str());
    std::remove(log_.c_str());
  }
  int port() const { return port_; }
  std::string log_text() const {
    std::ifstream in(log_);
    return {std::istreambuf_iterator<char>(in), {}};
  }

 private:
  std::string config_, log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

std::string http_get(int port, const std::string& target) {
  net::io_context ioc;
  tcp::socket socket(ioc);
  socket.connect({net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "127.0.0.1");
  http::write(socket, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res);
  return res.body();
}

struct Scrape {
  HistogramCounts decisions{std::vector<double>(corepool::kDecisionBuckets.begin(), corepool::kDecisionBuckets.end()),
                            std::vector<uint64_t>(corepool::kDecisionBuckets.size() + 1, 0)};
  double max_lag = 0;  // over the open streams
  double batches = 0, segments = 0;  // forward() calls and the segments / chunks they ran
};

// corepool_stream_decision_seconds' cumulative buckets back into counts, and the largest stream lag.
Scrape scrape(int port) {
  Scrape s;
  std::istringstream text(http_get(port, "/metrics"));
  const std::regex bucket(R"re(^corepool_stream_decision_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+))re");
  const std::regex lag(R"re(^corepool_stream_lag_seconds\{stream="\d+"\} ([0-9.e+-]+))re");
  std::vector<uint64_t> cumulative;
  for (std::string line; std::getline(text, line);) {
    std::smatch m;
    if (std::regex_search(line, m, bucket)) cumulative.push_back(static_cast<uint64_t>(std::stod(m[2])));
    else if (std::regex_search(line, m, lag)) s.max_lag = std::max(s.max_lag, std::stod(m[1]));
    else if (line.rfind("corepool_batches_total ", 0) == 0) s.batches = std::stod(line.substr(23));
    else if (line.rfind("corepool_segments_total ", 0) == 0) s.segments = std::stod(line.substr(24));
  }
  if (cumulative.size() != s.decisions.counts.size()) {
    throw std::runtime_error("/metrics has no corepool_stream_decision_seconds with the expected buckets");
  }
  for (size_t i = 0; i < cumulative.size(); ++i) s.decisions.counts[i] = cumulative[i] - (i ? cumulative[i - 1] : 0);
  s.decisions.count = cumulative.back();
  return s;
}

HistogramCounts minus(HistogramCounts after, const HistogramCounts& before) {
  for (size_t i = 0; i < after.counts.size(); ++i) after.counts[i] -= before.counts[i];
  after.count -= before.count;
  return after;
}

// ---- one stream ---------------------------------------------------------------

struct StreamOutcome {
  bool opened = false, summary = false;
  int close_code = 0;
  uint64_t events = 0, dropped = 0;
  double late_max = 0;  // seconds a frame went out after its time
  std::string error;
};

class Client : public std::enable_shared_from_this<Client> {
 public:
  Client(net::io_context& ioc, const std::string& pcm, size_t offset, const std::string& target, int port,
         Clock::time_point start, Clock::time_point stop)
      : ws_(ioc), timer_(ioc), pcm_(pcm), offset_(offset), target_(target), port_(port), next_(start), stop_(stop) {}

  void run() {
    ws_.next_layer().async_connect({net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)},
                                   [self = shared_from_this()](beast::error_code ec) { self->on_connect(ec); });
  }
  const StreamOutcome& outcome() const { return out_; }

 private:
  void fail(const char* what, beast::error_code ec) {
    if (out_.error.empty()) out_.error = std::string(what) + ": " + ec.message();
    timer_.cancel();
  }
  void on_connect(beast::error_code ec) {
    if (ec) return fail("connect", ec);
    ws_.async_handshake("127.0.0.1", target_, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->fail("handshake", ec);
      self->out_.opened = true;
      self->read();
      self->tick();
    });
  }
  void tick() {
    timer_.expires_at(next_);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return;
      const auto now = Clock::now();
      self->out_.late_max = std::max(self->out_.late_max, std::chrono::duration<double>(now - self->next_).count());
      if (self->next_ >= self->stop_) return self->enqueue("{\"end\": true}", false);
      self->enqueue(self->frame(), true);
      self->next_ += kFrame;
      self->tick();
    });
  }
  std::string frame() {  // the audio looped
    std::string f;
    while (f.size() < kFrameBytes) {
      const size_t n = std::min(kFrameBytes - f.size(), pcm_.size() - offset_);
      f.append(pcm_, offset_, n);
      offset_ = (offset_ + n) % pcm_.size();
    }
    return f;
  }
  void enqueue(std::string message, bool binary) {
    pending_.emplace_back(std::move(message), binary);
    if (!writing_) write();
  }
  void write() {
    if (pending_.empty()) return;
    writing_ = true;
    ws_.binary(pending_.front().second);
    ws_.async_write(net::buffer(pending_.front().first), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->writing_ = false;
      self->pending_.erase(self->pending_.begin());
      if (ec) return self->fail("write", ec);
      self->write();
    });
  }
  void read() {
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }
  void on_read(beast::error_code ec) {
    if (ec == websocket::error::closed) {
      out_.close_code = static_cast<int>(ws_.reason().code);
      timer_.cancel();
      return;
    }
    if (ec) return fail("read", ec);
    const std::string text = beast::buffers_to_string(buffer_.data());
    buffer_.consume(buffer_.size());
    const auto item = nlohmann::json::parse(text, nullptr, false);
    if (item.is_object() && item.contains("summary")) {
      out_.summary = true;
      out_.dropped = item["summary"].value("dropped", uint64_t{0});
    } else {
      ++out_.events;
    }
    read();
  }

  websocket::stream<tcp::socket> ws_;
  net::steady_timer timer_;
  const std::string& pcm_;
  size_t offset_;
  const std::string target_;
  const int port_;
  Clock::time_point next_;
  const Clock::time_point stop_;
  beast::flat_buffer buffer_;
  std::vector<std::pair<std::string, bool>> pending_;  // (message, binary)
  bool writing_ = false;
  StreamOutcome out_;
};

// ---- one run: K streams for D seconds ----------------------------------------

struct Run {
  int k = 0;
  bool sustained = false;
  bool capped = false;  // sustained at --max-k: the machine may take more
  std::string why;  // when not
  double p50_ms = 0, p99_ms = 0, lag_mid = 0, lag_end = 0, client_cpu_s = 0, client_late_max = 0;
  uint64_t decisions = 0;
  double mean_batch = 0;  // segments or chunks per forward() over the run
};

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

Run run_streams(const Options& o, int port, const std::string& model_name, const std::string& pcm, int k,
                double segment_s) {
  Run run;
  run.k = k;
  const Scrape before = scrape(port);
  const double cpu0 = cpu_seconds();
  net::io_context ioc;
  const auto start = Clock::now() + std::chrono::milliseconds(200);
  const auto stop = start + std::chrono::milliseconds(static_cast<int64_t>(o.seconds * 1000));
  const std::string target = "/v2/models/" + model_name + "/audio/stream?sample_rate=16000&channels=1&format=s16le";
  std::vector<std::shared_ptr<Client>> clients;
  for (int i = 0; i < k; ++i) {
    // Starts staggered over one frame, offsets spread over the audio: the streams are not in step.
    const auto first = start + kFrame * i / k;
    clients.push_back(std::make_shared<Client>(ioc, pcm, (pcm.size() / 2 * size_t(i) / size_t(k)) * 2, target, port,
                                               first, stop + (first - start)));
    clients.back()->run();
  }
  std::atomic<bool> io_done{false};
  std::thread io([&] {
    ioc.run();
    io_done.store(true);
  });
  std::this_thread::sleep_until(start + (stop - start) / 2);
  run.lag_mid = scrape(port).max_lag;
  std::this_thread::sleep_until(stop - std::chrono::milliseconds(300));
  run.lag_end = scrape(port).max_lag;
  // Every client has its close, or its error; one that still waits for its
  // summary 120 s after the end counts as not closed.
  for (const auto deadline = stop + std::chrono::seconds(120); !io_done.load() && Clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ioc.stop();
  io.join();
  run.client_cpu_s = cpu_seconds() - cpu0;
  const Scrape after = scrape(port);
  const HistogramCounts d = minus(after.decisions, before.decisions);
  if (after.batches > before.batches) {
    run.mean_batch = (after.segments - before.segments) / (after.batches - before.batches);
  }
  run.decisions = d.count;
  run.p50_ms = d.quantile(0.5) * 1e3;
  run.p99_ms = d.quantile(0.99) * 1e3;
  int failed = 0, unclosed = 0;
  uint64_t dropped = 0;
  std::string first_error;
  for (const auto& c : clients) {
    const StreamOutcome& s = c->outcome();
    run.client_late_max = std::max(run.client_late_max, s.late_max);
    dropped += s.dropped;
    if (!s.error.empty() || !s.opened) {
      ++failed;
      if (first_error.empty()) first_error = s.error;
    } else if (!s.summary || s.close_code != 1000) {
      ++unclosed;
    }
  }
  const double lag_bound = o.lag_bound_s + segment_s;
  if (failed) run.why = std::to_string(failed) + " streams failed (" + first_error + ")";
  else if (unclosed) run.why = std::to_string(unclosed) + " streams ended without summary and close 1000";
  else if (dropped) run.why = std::to_string(dropped) + " frames dropped";
  else if (run.lag_end >= lag_bound) run.why = "lag " + std::to_string(run.lag_end) + " s at the end";
  else if (run.lag_end - run.lag_mid >= 1.0) run.why = "lag growing";
  else if (o.p99_bound_ms > 0 && run.p99_ms >= o.p99_bound_ms) run.why = "p99 over the bound";
  run.sustained = run.why.empty();
  if (run.client_late_max > kLateLimit) {
    run.why += (run.why.empty() ? "" : "; ") + std::string("client late (its own limit)");
  }
  return run;
}

// ---- the driver ---------------------------------------------------------------

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

std::string read_pcm(const Options& o) {
  const std::string wav = o.work + "/corepool-streams-bench-" + std::to_string(::getpid()) + ".wav";
  corepool::synth::write_audio(wav, corepool::synth::demo_of_seconds(30, kRate));
  std::ifstream in(wav, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  std::remove(wav.c_str());
  const size_t data = bytes.find("data");
  if (data == std::string::npos) throw std::runtime_error(wav + ": no data chunk");
  return bytes.substr(data + 8);
}

// model.toml's name, and what a stateless model's events wait for (segment_seconds; 0 if stateful).
std::pair<std::string, double> model_facts(const std::string& dir) {
  std::ifstream in(dir + "/model.toml");
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  std::smatch m;
  std::string name = "default";
  double segment = 1.0;
  if (std::regex_search(text, m, std::regex(R"re(\nname\s*=\s*"([^"]+)")re"))) name = m[1];
  if (std::regex_search(text, m, std::regex(R"(\nsegment_seconds\s*=\s*([0-9.]+))"))) segment = std::stod(m[1]);
  if (std::regex_search(text, std::regex(R"re(\nkind\s*=\s*"stateful")re"))) segment = 0;
  return {name, segment};
}

// A quantile in the histogram's +Inf bucket is only known to be past its
// last bound: printed as "> 10000" ms rather than as the bound itself.
std::string quantile_text(double ms) {
  const double top_ms = corepool::kDecisionBuckets.back() * 1e3;
  char text[32];
  if (ms >= top_ms) std::snprintf(text, sizeof text, "> %.0f", top_ms);
  else std::snprintf(text, sizeof text, "%.1f", ms);
  return text;
}

void print_run(const Run& r) {
  std::printf("  K=%-5d %-9s p50 %7s ms  p99 %7s ms  (%llu decisions, mean batch %.1f)  lag %.2f -> %.2f s  "
              "client cpu %.1f s%s%s\n",
              r.k, r.sustained ? "sustained" : "NOT", quantile_text(r.p50_ms).c_str(), quantile_text(r.p99_ms).c_str(),
              static_cast<unsigned long long>(r.decisions), r.mean_batch, r.lag_mid, r.lag_end, r.client_cpu_s,
              r.why.empty() ? "" : "  ", r.why.c_str());
  std::fflush(stdout);
}

// Doubling while sustained, then bisecting: the largest K sustained (0 if none) and its run.
Run find_k(const Options& o, int port, const std::string& name, const std::string& pcm, double segment_s) {
  Run best;
  int lo = 0, hi = 0;
  for (int k = o.start_k; k <= o.max_k; k *= 2) {
    const Run r = run_streams(o, port, name, pcm, k, segment_s);
    print_run(r);
    if (!r.sustained) {
      hi = k;
      break;
    }
    best = r;
    lo = k;
  }
  best.capped = hi == 0 && best.sustained;
  while (hi && hi - lo > std::max(1, lo / 8)) {
    const int k = (lo + hi) / 2;
    const Run r = run_streams(o, port, name, pcm, k, segment_s);
    print_run(r);
    if (r.sustained) {
      best = r;
      lo = k;
    } else {
      hi = k;
    }
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"How many real-time 16 kHz streams corepool serve sustains, and its decision time (see the top of "
               "bench/streams_bench.cc)"};
  app.add_option("--corepool", o.corepool, "the corepool binary")->required();
  app.add_option("--model", o.model, "model directory")->required();
  app.add_option("--modes", o.modes, "thread,process");
  app.add_option("--seconds", o.seconds, "each run's length, seconds of real time");
  app.add_option("--start-k", o.start_k, "the first stream count");
  app.add_option("--max-k", o.max_k, "no more streams than this");
  app.add_option("--workers", o.workers, "engine.workers (cores)");
  app.add_option("--lag-bound-s", o.lag_bound_s, "a stream's lag at the end must stay under this plus a segment");
  app.add_option("--p99-bound-ms", o.p99_bound_ms, "and the decisions' p99 under this (0: no bound)");
  app.add_option("--work", o.work, "where the config, log and audio go while it runs");
  CLI11_PARSE(app, argc, argv);
  rlimit nofile{};
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &nofile);
  ::signal(SIGPIPE, SIG_IGN);

  const auto [name, segment_s] = model_facts(o.model);
  // The table names the model by its directory: CNN10's model.toml is named "default" too.
  std::string dir = o.model;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string label = dir.substr(dir.find_last_of('/') + 1);
  const std::string pcm = read_pcm(o);
  struct Row {
    std::string mode;
    Run run;
  };
  std::vector<Row> rows;
  std::stringstream modes(o.modes);
  for (std::string mode; std::getline(modes, mode, ',');) {
    std::printf("%s, %s mode, %d workers, %.0f s per run:\n", label.c_str(), mode.c_str(), o.workers, o.seconds);
    try {
      Server server(o, mode);
      rows.push_back({mode, find_k(o, server.port(), name, pcm, segment_s)});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s mode: %s\n", mode.c_str(), e.what());
      return 1;
    }
  }
  std::printf("\n| model | mode | K sustained | p50 ms | p99 ms | client cpu (cores) | CPU |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %s | %s%d | %.1f | %.1f | %.2f | %s |\n", label.c_str(), r.mode.c_str(),
                r.run.capped ? ">= " : "", r.run.k, r.run.p50_ms,
                r.run.p99_ms, r.run.client_cpu_s / o.seconds, cpu_name().c_str());
  }
  std::printf("\nsustained: every stream ended with its summary and close 1000, dropped nothing, its lag stayed under "
              "%.1f s + a segment (%.1f s) and grew less than 1 s from half-way%s. The client shares the cpus: its "
              "cpu time is above.\n",
              o.lag_bound_s, segment_s,
              o.p99_bound_ms > 0 ? (", and p99 < " + std::to_string(int(o.p99_bound_ms)) + " ms").c_str() : "");
  return 0;
}
