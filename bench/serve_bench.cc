// corepool-serve-bench: the HTTP service measured in one run on one machine,
// each figure next to its reference. For each mode (thread, process):
//   1. start: spawn `corepool serve`, time until systemd's READY=1 arrives on
//      our own NOTIFY_SOCKET (every worker up);
//   2. the server's floor: GET /v2/health/live, one connection, wrk --latency;
//   3. infer at low load: POST /v2/models/NAME/infer (JSON, and the binary
//      tensor extension), one connection, minus the forward() time of the
//      same input (in this process, and inside the workers): the serving
//      overhead; --latency-model picks a small model so that forward()'s own
//      jitter does not drown the overhead;
//   4. throughput: health/live with wrk -c64, and infer with wrk -c256 -d30s
//      (socket errors and non-2xx answers counted: backpressure is 503).
// Prints a table; never passes or fails on timing. Usage:
//   corepool-serve-bench --corepool build/supervisor/corepool --model models/default [--modes thread,process]
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "worker/engine.h"
#include "worker/runtime.h"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

struct Options {
  std::string corepool = "build/supervisor/corepool";
  std::string model = "models/default";
  std::string latency_model;  // default: model
  std::vector<std::string> modes = {"thread", "process"};
  int workers = 0;
  int load_seconds = 30;
  int connections = 256;
  std::string scratch = "/tmp";
};

// What wrk printed, parsed.
struct WrkResult {
  double p50_us = 0, p90_us = 0, p99_us = 0;
  double rps = 0;
  long requests = 0, non2xx = 0, socket_errors = 0;
  std::string raw;
};

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("popen failed: " + cmd);
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  ::pclose(p);
  return out;
}

double to_us(double v, const std::string& unit) {
  if (unit == "us") return v;
  if (unit == "ms") return v * 1e3;
  if (unit == "s") return v * 1e6;
  return v;
}

WrkResult wrk(const std::string& url, int threads, int conns, int seconds, const std::string& script = "") {
  std::string cmd = "wrk --latency -t" + std::to_string(threads) + " -c" + std::to_string(conns) + " -d" +
                    std::to_string(seconds) + "s --timeout 30s ";
  if (!script.empty()) cmd += "-s " + script + " ";
  WrkResult r;
  r.raw = run(cmd + url + " 2>&1");
  std::smatch m;
  auto pct = [&](const char* p, double& out) {
    if (std::regex_search(r.raw, m, std::regex(std::string("\\s") + p + "%\\s+([0-9.]+)(us|ms|s)"))) {
      out = to_us(std::stod(m[1]), m[2]);
    }
  };
  pct("50", r.p50_us);
  pct("90", r.p90_us);
  pct("99", r.p99_us);
  if (std::regex_search(r.raw, m, std::regex("Requests/sec:\\s+([0-9.]+)"))) r.rps = std::stod(m[1]);
  if (std::regex_search(r.raw, m, std::regex("([0-9]+) requests in"))) r.requests = std::stol(m[1]);
  if (std::regex_search(r.raw, m, std::regex("Non-2xx or 3xx responses: ([0-9]+)"))) r.non2xx = std::stol(m[1]);
  if (std::regex_search(r.raw, m, std::regex("Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)"))) {
    r.socket_errors = std::stol(m[1]) + std::stol(m[2]) + std::stol(m[3]) + std::stol(m[4]);
  }
  return r;
}

// A running `corepool serve` with its own NOTIFY_SOCKET.
class Server {
 public:
  Server(const Options& o, const std::string& mode) {
    dir_ = o.scratch + "/corepool-serve-bench-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    const std::string sock = dir_ + "/notify";
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, sock.c_str(), sizeof(addr.sun_path) - 1);
    ::unlink(sock.c_str());
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) throw std::runtime_error("bind " + sock);
    log_ = dir_ + "/serve.log";
    const auto t0 = Clock::now();
    pid_ = ::fork();
    if (pid_ == 0) {
      const int err = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(err, 2);
      ::setenv("NOTIFY_SOCKET", sock.c_str(), 1);
      std::vector<std::string> args = {o.corepool, "--log-level", "info", "serve", "--mode", mode, "--model", o.model,
                                       "--listen", "127.0.0.1:0", "--grpc-listen", "", "--workers", std::to_string(o.workers)};
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    wait_ready();
    ready_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    // Nobody reads STATUS updates from here on: close the socket, so that the
    // server's sends fail at once instead of filling a queue nobody drains.
    ::close(fd_);
    fd_ = -1;
    ::unlink(sock.c_str());
    std::ifstream in(log_);
    std::stringstream text;
    text << in.rdbuf();
    std::smatch m;
    const std::string s = text.str();
    if (!std::regex_search(s, m, std::regex("on http://[^ ]*:([0-9]+)"))) throw std::runtime_error("no port in " + log_);
    port_ = std::stoi(m[1]);
  }
  ~Server() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    if (fd_ >= 0) ::close(fd_);
    std::filesystem::remove_all(dir_);
  }
  double ready_ms() const { return ready_ms_; }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  const std::string& dir() const { return dir_; }

 private:
  void wait_ready() {
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 1000) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n > 0 && std::string(buf, n).find("READY=1") != std::string::npos) return;
    }
    throw std::runtime_error("no READY=1 within 120 s; see " + log_);
  }
  std::string dir_, log_;
  int fd_ = -1;
  pid_t pid_ = -1;
  int port_ = 0;
  double ready_ms_ = 0;
};

// The model's input for one segment of a tone, computed as the server would.
std::vector<float> one_item(const corepool::Engine& engine) {
  const auto& cfg = engine.model().config;
  std::vector<float> pcm(cfg.segment_samples());
  for (size_t i = 0; i < pcm.size(); ++i) pcm[i] = 0.3f * std::sin(2 * M_PI * 440.0 * i / cfg.sample_rate);
  const torch::Tensor f = engine.features({pcm.data()}).contiguous();
  return {f.data_ptr<float>(), f.data_ptr<float>() + f.numel()};
}

// Median forward() time of that input in this process, batch 1, one thread:
// back to back (caches hot), and with `gap_us` of sleep before each call, as
// a server at low load sees it (caches and clocks cool between requests).
double inprocess_forward_us(corepool::Engine& engine, const std::vector<float>& item, int gap_us = 0) {
  std::vector<int64_t> shape = {1};
  for (int64_t d : engine.model().config.item_shape()) shape.push_back(d);
  const torch::Tensor input = torch::from_blob(const_cast<float*>(item.data()), shape).clone();
  for (int i = 0; i < 5; ++i) engine.forward(input);
  std::vector<double> us;
  for (int i = 0; i < 200; ++i) {
    if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    const auto t0 = Clock::now();
    engine.forward(input);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// wrk scripts: JSON body, and the binary tensor extension.
std::pair<std::string, std::string> write_scripts(const std::string& dir, const corepool::ModelConfig& cfg,
                                                  const std::vector<float>& item) {
  json shape = {1};
  for (int64_t d : cfg.item_shape()) shape.push_back(d);
  const json body = {{"inputs", {{{"name", "input"}, {"datatype", "FP32"}, {"shape", shape}, {"data", item}}}}};
  std::ofstream(dir + "/infer.json") << body.dump();
  json header = {{"inputs", {{{"name", "input"}, {"datatype", "FP32"}, {"shape", shape},
                             {"parameters", {{"binary_data_size", item.size() * 4}}}}}}};
  const std::string h = header.dump();
  std::ofstream(dir + "/infer.bin", std::ios::binary)
      << h << std::string(reinterpret_cast<const char*>(item.data()), item.size() * 4);
  auto script = [&](const std::string& name, const std::string& file, const std::string& extra) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << "wrk.method = \"POST\"\n" << extra << "local f = io.open(\"" << dir << "/" << file
                        << "\", \"rb\")\nwrk.body = f:read(\"*a\")\nf:close()\n";
    return path;
  };
  return {script("json.lua", "infer.json", "wrk.headers[\"Content-Type\"] = \"application/json\"\n"),
          script("bin.lua", "infer.bin",
                 "wrk.headers[\"Inference-Header-Content-Length\"] = \"" + std::to_string(h.size()) + "\"\n")};
}

std::string metrics_of(const Server& server) { return run("curl -s " + server.url("/metrics")); }

// Sum of every sample of `family` in a /metrics text (all label sets),
// or, with `labels`, of the one sample that has exactly them.
double scrape(const std::string& text, const std::string& family, const std::string& labels = "") {
  std::istringstream in(text);
  double sum = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(family, 0) != 0 || line.size() <= family.size()) continue;
    const char next = line[family.size()];
    if (next != ' ' && next != '{') continue;
    if (!labels.empty() && line.compare(family.size(), labels.size(), labels) != 0) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// Serving overhead at low load: one connection, so every request finds the
// server idle and pays every wake-up. The reference is the forward() time of
// the same input, measured twice: in this process before the run, and inside
// the workers during it (their busy time per segment, from /metrics), since
// on 2 vCPUs sharing one vector unit the two differ by more than the overhead.
void bench_latency(const Options& o, const std::string& mode, const std::string& model_dir) {
  auto model = corepool::load_model(model_dir);
  corepool::Engine engine(model);
  const std::vector<float> item = one_item(engine);
  const double hot_us = inprocess_forward_us(engine, item);
  // The gap a request sees at one connection: about one round trip of the client.
  const double forward_us = inprocess_forward_us(engine, item, 500);
  Options lo = o;
  lo.model = model_dir;
  Server server(lo, mode);
  const auto [json_script, bin_script] = write_scripts(server.dir(), model->config, item);
  const std::string infer = server.url("/v2/models/" + model->config.name + "/infer");
  wrk(server.url("/v2/health/live"), 1, 1, 2);  // warm up
  wrk(infer, 1, 1, 2, bin_script);
  const WrkResult live = wrk(server.url("/v2/health/live"), 1, 1, 10);
  std::printf("\n## %s mode, latency at low load (model %s)\n", mode.c_str(), model_dir.c_str());
  std::printf("health/live, 1 connection: p50 %.0f us  p90 %.0f us  p99 %.0f us  (%.0f req/s)\n", live.p50_us,
              live.p90_us, live.p99_us, live.rps);
  std::printf("in-process forward(), batch 1, this process: p50 %.0f us back to back, %.0f us after 500 us idle "
              "(the reference below)\n", hot_us, forward_us);
  for (const auto& [name, script] : {std::pair<const char*, std::string>{"infer JSON  ", json_script},
                                     {"infer binary", bin_script}}) {
    const std::string before = metrics_of(server);
    const WrkResult r = wrk(infer, 1, 1, 10, script);
    const std::string after = metrics_of(server);
    const double busy_us = (scrape(after, "corepool_worker_busy_seconds_total") -
                            scrape(before, "corepool_worker_busy_seconds_total")) * 1e6 /
                           std::max(1.0, scrape(after, "corepool_segments_total") - scrape(before, "corepool_segments_total"));
    std::printf("%s, 1 connection: p50 %.0f us; minus in-process forward %.0f us = %.2f x live p50; "
                "minus the workers' own forward (%.0f us/request) %.0f us = %.2f x live p50\n",
                name, r.p50_us, r.p50_us - forward_us, (r.p50_us - forward_us) / live.p50_us, busy_us,
                r.p50_us - busy_us, (r.p50_us - busy_us) / live.p50_us);
  }
}

// Start time and throughput with the real model: READY=1, health/live
// throughput, and infer under 256 connections (far over capacity: the bounded
// queue answers the excess 503, which the scrape after the run separates).
void bench_load(const Options& o, const std::string& mode) {
  auto model = corepool::load_model(o.model);
  corepool::Engine engine(model);
  Server server(o, mode);
  const auto [json_script, bin_script] = write_scripts(server.dir(), model->config, one_item(engine));
  const std::string infer = server.url("/v2/models/" + model->config.name + "/infer");
  const WrkResult live_tp = wrk(server.url("/v2/health/live"), 2, 64, 10);
  const WrkResult load = wrk(infer, 2, o.connections, o.load_seconds, bin_script);
  std::printf("\n## %s mode, start and load (model %s)\n", mode.c_str(), o.model.c_str());
  std::printf("READY=1 after start (every worker up): %.0f ms\n", server.ready_ms());
  std::printf("health/live throughput, 64 connections: %.0f req/s (p50 %.0f us, p99 %.0f us)\n", live_tp.rps,
              live_tp.p50_us, live_tp.p99_us);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // let requests cut off by wrk's end finish
  const std::string text = metrics_of(server);
  const std::string ep = "{endpoint=\"infer\",code=";
  const double ok = scrape(text, "corepool_requests_total", ep + "\"200\",");
  const double busy = scrape(text, "corepool_requests_total", ep + "\"503\",");
  const double all = scrape(text, "corepool_requests_total", "{endpoint=\"infer\"");
  std::printf("infer binary, %d connections, %d s: %ld requests (%.1f req/s), socket errors %ld, non-2xx %ld; "
              "server: %.0f answered 200 (%.1f/s), %.0f answered 503 (queue full), %.0f other\n",
              o.connections, o.load_seconds, load.requests, load.rps, load.socket_errors, load.non2xx, ok,
              ok / o.load_seconds, busy, all - ok - busy);
  std::printf("  latency p50 %.0f us, p99 %.0f us (503s included)\n", load.p50_us, load.p99_us);
  // Triton's statistics extension against /metrics after the same run.
  const auto stats = nlohmann::json::parse(run("curl -s " + server.url("/v2/models/" + model->config.name + "/stats")));
  const auto& is = stats["model_stats"][0]["inference_stats"];
  const double success = is["success"]["count"].get<double>(), fail = is["fail"]["count"].get<double>();
  std::printf("  /v2/models/%s/stats after the run: success %.0f, fail %.0f; /metrics: %.0f answered 200, %.0f not: %s\n",
              model->config.name.c_str(), success, fail, ok, all - ok,
              success == ok && fail == all - ok ? "equal" : "DIFFERENT");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"corepool-serve-bench: the HTTP service against its own floor and in-process inference"};
  app.add_option("--corepool", o.corepool, "the corepool binary");
  app.add_option("--model", o.model, "model directory");
  app.add_option("--latency-model", o.latency_model, "model of the low-load latency runs (default: --model)");
  app.add_option("--modes", o.modes, "thread,process")->delimiter(',');
  app.add_option("--workers", o.workers, "workers (0 = usable cpus)");
  app.add_option("--load-seconds", o.load_seconds, "length of the wrk load run");
  app.add_option("--connections", o.connections, "connections of the wrk load run");
  CLI11_PARSE(app, argc, argv);
  corepool::configure_runtime_threads({1, 1});
  ::signal(SIGPIPE, SIG_IGN);
  std::printf("# corepool-serve-bench (%s, %d workers = 0: usable cpus)\n", o.corepool.c_str(), o.workers);
  for (const auto& mode : o.modes) {
    bench_latency(o, mode, o.latency_model.empty() ? o.model : o.latency_model);
    std::fflush(stdout);
    bench_load(o, mode);
    std::fflush(stdout);
  }
  return 0;
}
