// corepool-grpc-bench: what gRPC costs against HTTP, in one run on one
// machine. For each mode, one `corepool serve` with both endpoints; the same
// input (one item, batch 1) sent one request at a time over one connection,
// alternating blocks of HTTP (binary tensor extension, keep-alive) and gRPC
// (ModelInfer with raw_input_contents, one channel). Each protocol's p50
// minus the workers' own forward() per request (their busy time over the
// block, from /metrics) is its serving overhead; both are printed side by
// side. Prints figures, never passes or fails on timing. Usage:
//   corepool-grpc-bench --corepool build/supervisor/corepool --model build/models/cnn10
#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "bench/grpc_floor.h"
#include "config/model_config.h"
#include "supervisor/grpc/proto/grpc_service.grpc.pb.h"
#include "tests/support/client_shm_object.h"
#include "tests/support/http_client.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string corepool = "build/supervisor/corepool";
  std::string model = "build/models/cnn10";
  std::vector<std::string> modes = {"thread", "process"};
  int workers = 0;
  int requests = 300;  // per block
  int rounds = 3;      // blocks per protocol, interleaved
  int shm_items = 40;  // 40 x 6464 floats of the default model's input: 1.03 MB
};

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One `corepool serve` with HTTP and gRPC on ephemeral ports.
class Server {
 public:
  Server(const Options& o, const std::string& mode) {
    dir_ = std::filesystem::temp_directory_path() / ("corepool-grpc-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    log_ = dir_ + "/serve.log";
    const std::string config = dir_ + "/corepool.toml";
    // A request may hold at most engine.queue_depth items, by default
    // 4 x workers x the measured batch: 16 when the calibration picks 2, too
    // few for the shared-memory comparison's 40 items.
    std::ofstream(config) << "[serve]\nallow_client_shm = true\nallow_model_control = true\n[engine]\nqueue_depth = " << 4 * o.shm_items << "\n";
    pid_ = ::fork();
    if (pid_ == 0) {
      const int err = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(err, 2);
      std::vector<std::string> args = {o.corepool, "--log-level", "info", "--config", config, "serve", "--mode", mode, "--model", o.model,
                                       "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0",
                                       "--workers", std::to_string(o.workers)};
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(180);
    std::smatch http, grpc;
    for (;;) {
      const std::string text = read_all(log_);
      if (std::regex_search(text, http, std::regex("on http://[^ ]*:([0-9]+)")) &&
          std::regex_search(text, grpc, std::regex("gRPC: serving on grpc://[^ ]*:([0-9]+)"))) {
        http_port_ = std::stoi(http[1]);
        grpc_port_ = std::stoi(grpc[1]);
        return;
      }
      if (Clock::now() > deadline || ::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        throw std::runtime_error("serve did not start; its log:\n" + text);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~Server() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    std::filesystem::remove_all(dir_);
  }
  int http_port() const { return http_port_; }
  int grpc_port() const { return grpc_port_; }

 private:
  std::string dir_, log_;
  pid_t pid_ = -1;
  int http_port_ = 0, grpc_port_ = 0;
};

// Sum of every sample of `family` in a /metrics text.
double scrape(const std::string& text, const std::string& family) {
  std::istringstream in(text);
  double sum = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(family, 0) != 0 || line.size() <= family.size()) continue;
    if (line[family.size()] != ' ' && line[family.size()] != '{') continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

struct Block {
  std::vector<double> us;      // each request's round trip
  double forward_us = 0;       // the workers' busy time per request over the block
};

// `n` requests through `send` (true = answered OK), with the workers' busy time around them.
template <class Send>
Block run_block(int n, corepool::testing::HttpClient& metrics, Send&& send) {
  const std::string before = metrics.get("/metrics").body;
  Block b;
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    if (!send()) throw std::runtime_error("a request failed");
    b.us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  const std::string after = metrics.get("/metrics").body;
  const double busy = scrape(after, "corepool_worker_busy_seconds_total") - scrape(before, "corepool_worker_busy_seconds_total");
  const double segments = scrape(after, "corepool_segments_total") - scrape(before, "corepool_segments_total");
  b.forward_us = busy * 1e6 / std::max(1.0, segments);
  return b;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

// One input item of the model's shape, deterministic.
std::vector<float> make_item(const corepool::ModelConfig& model) {
  std::vector<float> item(model.item_floats());
  for (size_t i = 0; i < item.size(); ++i) item[i] = static_cast<float>((i * 7919) % 1000) / 500.0f - 1.0f;
  return item;
}

nlohmann::json batch_shape(const corepool::ModelConfig& model, int batch) {
  nlohmann::json shape = {batch};
  for (int64_t d : model.item_shape()) shape.push_back(d);
  return shape;
}

void print_row(const char* name, const Block& b) {
  std::printf("| %s | %.0f | %.0f | %.0f | %.0f |\n", name, percentile(b.us, 0.5), percentile(b.us, 0.9), b.forward_us,
              percentile(b.us, 0.5) - b.forward_us);
}

// true for a 200; otherwise says on stderr what came back (status 0: the connection failed, see error).
bool answered_ok(const corepool::testing::HttpReply& reply, const char* what) {
  if (reply.status == 200) return true;
  std::fprintf(stderr, "%s: HTTP %d %s%s\n", what, reply.status, reply.error.c_str(), reply.body.substr(0, 300).c_str());
  return false;
}

// A region the client maps and writes, as Triton's shm clients do.
class MappedRegion {
 public:
  explicit MappedRegion(size_t bytes) : object_(bytes), bytes_(bytes) {
    data_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, object_.fd(), 0);
    if (data_ == MAP_FAILED) throw std::runtime_error("mmap of the client's region failed");
  }
  ~MappedRegion() { ::munmap(data_, bytes_); }
  const std::string& key() const { return object_.key(); }
  void write(const std::string& bytes) { std::memcpy(data_, bytes.data(), bytes.size()); }

 private:
  corepool::testing::ClientShmObject object_;
  size_t bytes_;
  void* data_;
};

// Triton's system shared memory against the binary extension, for the same
// `o.shm_items`-item input (answers as JSON both ways). Each shm request
// includes the client's copy of the tensor into its region.
void bench_shm(const Options& o, const Server& server, const corepool::ModelConfig& model) {
  std::string bytes;
  const std::vector<float> item = make_item(model);
  for (int i = 0; i < o.shm_items; ++i) bytes.append(reinterpret_cast<const char*>(item.data()), item.size() * sizeof(float));
  const nlohmann::json shape = batch_shape(model, o.shm_items);
  const std::string path = "/v2/models/" + model.name + "/infer";
  corepool::testing::HttpClient http(server.http_port()), metrics(server.http_port());

  const std::string header = nlohmann::json{{"inputs", {{{"name", "input"}, {"datatype", "FP32"}, {"shape", shape},
                                                         {"parameters", {{"binary_data_size", bytes.size()}}}}}}}
                                 .dump();
  const std::string body = header + bytes;
  const std::string extra = "Inference-Header-Content-Length: " + std::to_string(header.size()) + "\r\n";
  auto binary_send = [&] { return answered_ok(http.post(path, body, extra), "binary infer"); };

  MappedRegion region(bytes.size());
  const nlohmann::json registration = {{"key", region.key()}, {"offset", 0}, {"byte_size", bytes.size()}};
  const auto registered = http.post("/v2/systemsharedmemory/region/bench-in/register", registration.dump());
  if (registered.status != 200) throw std::runtime_error("registering the region failed: " + registered.body);
  const std::string shm_body =
      nlohmann::json{{"inputs", {{{"name", "input"}, {"datatype", "FP32"}, {"shape", shape},
                                  {"parameters", {{"shared_memory_region", "bench-in"},
                                                  {"shared_memory_byte_size", bytes.size()}}}}}}}
          .dump();
  auto shm_send = [&] {
    region.write(bytes);
    return answered_ok(http.post(path, shm_body), "shared-memory infer");
  };

  // Pairs, in alternating order: the forward() of 40 items varies by more
  // than the transfer costs, so each pair's difference is what compares.
  const int pairs = o.rounds * std::max(20, o.requests / 3);
  auto timed = [](const std::function<bool()>& send) {
    const auto t0 = Clock::now();
    if (!send()) throw std::runtime_error("a request failed (see above)");
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  };
  for (int i = 0; i < 10; ++i) timed(binary_send), timed(shm_send);  // warm up both paths
  std::vector<double> b, m, saved;
  for (int i = 0; i < pairs; ++i) {
    const bool binary_first = i % 2 == 0;
    const double first = timed(binary_first ? std::function<bool()>(binary_send) : shm_send);
    const double second = timed(binary_first ? std::function<bool()>(shm_send) : binary_send);
    b.push_back(binary_first ? first : second);
    m.push_back(binary_first ? second : first);
    saved.push_back(b.back() - m.back());
  }
  std::printf("\n### %d items (%.2f MB) per request, %d pairs (one request each way, alternating order)\n",
              o.shm_items, bytes.size() / 1e6, pairs);
  std::printf("| path | p50 us | p90 us |\n|---|---|---|\n");
  std::printf("| HTTP binary extension (tensor in the body) | %.0f | %.0f |\n", percentile(b, 0.5), percentile(b, 0.9));
  std::printf("| system shared memory (client copies into its region) | %.0f | %.0f |\n", percentile(m, 0.5),
              percentile(m, 0.9));
  std::printf("binary minus shared memory, per pair: median %.0f us (quartiles %.0f, %.0f); shared memory faster "
              "in %.0f%% of pairs\n",
              percentile(saved, 0.5), percentile(saved, 0.25), percentile(saved, 0.75),
              100.0 * std::count_if(saved.begin(), saved.end(), [](double d) { return d > 0; }) / saved.size());
  std::fflush(stdout);
}

void bench_mode(const Options& o, const std::string& mode) {
  const corepool::ModelConfig model = corepool::load_model_config(o.model + "/model.toml");
  const std::vector<float> item = make_item(model);
  const std::string bytes(reinterpret_cast<const char*>(item.data()), item.size() * sizeof(float));
  const nlohmann::json shape = batch_shape(model, 1);

  Server server(o, mode);
  // HTTP: the binary tensor extension, one keep-alive connection.
  const std::string header = nlohmann::json{{"inputs", {{{"name", "input"}, {"datatype", "FP32"}, {"shape", shape},
                                                         {"parameters", {{"binary_data_size", bytes.size()}}}}}}}
                                 .dump();
  const std::string body = header + bytes;
  const std::string path = "/v2/models/" + model.name + "/infer";
  const std::string extra = "Inference-Header-Content-Length: " + std::to_string(header.size()) + "\r\n";
  corepool::testing::HttpClient http(server.http_port()), metrics(server.http_port());
  auto http_send = [&] { return http.post(path, body, extra).status == 200; };
  // gRPC: ModelInfer with raw_input_contents, one channel.
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server.grpc_port()), grpc::InsecureChannelCredentials());
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  inference::ModelInferRequest request;
  request.set_model_name(model.name);
  auto* in = request.add_inputs();
  in->set_name("input");
  in->set_datatype("FP32");
  for (const auto& d : shape) in->add_shape(d.get<int64_t>());
  request.add_raw_input_contents(bytes);
  auto grpc_send = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    inference::ModelInferResponse response;
    return stub->ModelInfer(&ctx, request, &response).ok();
  };

  // Each protocol's floor: its health call, no inference.
  auto http_live = [&] { return http.get("/v2/health/live").status == 200; };
  auto grpc_live = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    inference::ServerLiveResponse response;
    return stub->ServerLive(&ctx, inference::ServerLiveRequest(), &response).ok();
  };

  run_block(50, metrics, http_send);  // warm up both paths
  run_block(50, metrics, grpc_send);
  Block h, g, hl, gl;
  for (int r = 0; r < o.rounds; ++r) {
    for (const auto& [block, send] : {std::pair<Block*, std::function<bool()>>{&h, http_send}, {&g, grpc_send},
                                      {&hl, http_live}, {&gl, grpc_live}}) {
      const Block b = run_block(o.requests, metrics, send);
      block->us.insert(block->us.end(), b.us.begin(), b.us.end());
      block->forward_us += b.forward_us / o.rounds;
    }
  }
  std::printf("\n## %s mode (model %s, %zu floats per request, %d x %d requests per protocol, interleaved)\n",
              mode.c_str(), model.name.c_str(), item.size(), o.rounds, o.requests);
  std::printf("| protocol | p50 us | p90 us | workers' forward us/request | p50 overhead us |\n|---|---|---|---|---|\n");
  print_row("HTTP binary extension", h);
  print_row("gRPC raw_input_contents", g);
  std::printf("floors, no inference: HTTP GET /v2/health/live p50 %.0f us, gRPC ServerLive p50 %.0f us\n",
              percentile(hl.us, 0.5), percentile(gl.us, 0.5));
  std::fflush(stdout);
  bench_shm(o, server, model);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"corepool-grpc-bench: gRPC's serving overhead against HTTP's binary extension"};
  app.add_option("--corepool", o.corepool, "the corepool binary");
  app.add_option("--model", o.model, "model directory");
  app.add_option("--modes", o.modes, "thread,process")->delimiter(',');
  app.add_option("--workers", o.workers, "workers (0 = usable cpus)");
  app.add_option("--requests", o.requests, "requests per block");
  app.add_option("--rounds", o.rounds, "blocks per protocol");
  app.add_option("--shm-items", o.shm_items, "items per request of the shared-memory comparison");
  CLI11_PARSE(app, argc, argv);
  ::signal(SIGPIPE, SIG_IGN);
  std::printf("# corepool-grpc-bench (%s)\n", o.corepool.c_str());
  for (const auto& mode : o.modes) bench_mode(o, mode);
  corepool::bench::print_bare_grpc_floor(3 * o.requests);
  return 0;
}
