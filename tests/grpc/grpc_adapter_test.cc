// The gRPC adapter (supervisor/grpc/) over a scripted triton::Service: a real
// GrpcServer on an ephemeral port and gRPC's C++ client, no model and no
// workers, so every mapping (messages, status codes, deadline, cancellation,
// message limit, socket activation, drain) is checked in isolation. The real
// server is driven end to end by grpc_e2e_test.py.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "supervisor/grpc/grpc_server.h"
#include "supervisor/grpc/grpc_service.h"
#include "supervisor/grpc/grpc_stream_chunk.h"
#include "supervisor/grpc/proto/grpc_service.grpc.pb.h"
#include "tests/support/wait.h"

namespace corepool {
namespace {

using triton::Code;

ModelConfig small_model() {
  ModelConfig m;
  m.name = "tiny";
  m.input = InputKind::kWaveform;
  m.sample_rate = 1000;
  m.segment_seconds = 0.004;  // 4 samples: item_shape {4}
  m.hop_seconds = 0.004;
  m.labels = {"a", "b"};
  m.thresholds = {0.5f, 0.5f};
  m.max_batch = 8;
  return m;
}

// What the fake did with a call; cancel() answers kCancelled like the real one.
class FakeCall : public triton::InferCall {
 public:
  explicit FakeCall(triton::InferDone done) : done_(std::move(done)) {}
  void cancel() override {
    cancelled = true;
    answer({Code::kCancelled, "cancelled"}, {});
  }
  void answer(triton::Status s, triton::InferOutput&& out) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) return;
    auto done = std::move(done_);
    done_ = nullptr;
    done(std::move(s), std::move(out));
  }
  std::atomic<bool> cancelled{false};

 private:
  std::mutex mu_;
  triton::InferDone done_;
};

// Scripted answers; records what the adapter asked.
class FakeService : public triton::Service {
 public:
  bool live() override { return true; }
  bool server_ready() override { return true; }
  triton::Status model_ready(const std::string& model, const std::string&) override {
    if (model != "tiny") return {Code::kNotFound, "no model \"" + model + "\""};
    return unloaded ? triton::Status{Code::kUnavailable, "unloaded"} : triton::Status{};
  }
  std::string server_metadata_json() override {
    return R"({"name":"corepool","version":"9","extensions":["binary_tensor_data","statistics"]})";
  }
  triton::Result<std::string> model_metadata_json(const std::string& model, const std::string&) override {
    if (model != "tiny") return {{Code::kNotFound, "no model"}, ""};
    return {{}, R"({"name":"tiny","versions":["1"],"platform":"pytorch_libtorch",)"
                R"("inputs":[{"name":"input","datatype":"FP32","shape":[-1,4]}],)"
                R"("outputs":[{"name":"scores","datatype":"FP32","shape":[-1,2]}]})"};
  }
  triton::Result<std::string> model_config_json(const std::string&, const std::string&) override {
    return {{}, R"({"name":"tiny","platform":"pytorch_libtorch","backend":"pytorch","max_batch_size":8,)"
                R"("input":[{"name":"input","data_type":"TYPE_FP32","dims":[4]}],)"
                R"("instance_group":[{"kind":"KIND_CPU","count":2}],)"
                R"("dynamic_batching":{"max_queue_delay_microseconds":100},)"
                R"("parameters":{"mode":{"string_value":"thread"}},"some_future_field":1})"};
  }
  triton::Result<std::string> statistics_json(const std::string&, const std::string&) override {
    return {{}, R"({"model_stats":[{"name":"tiny","version":"1","inference_count":12345678901,)"
                R"("inference_stats":{"success":{"count":3,"ns":900}},)"
                R"("batch_stats":[{"batch_size":2,"compute_infer":{"count":1,"ns":5}}]}]})"};
  }
  std::string repository_index_json(bool ready_only) override {
    last_ready_only = ready_only;
    return R"([{"name":"tiny","version":"1","state":"READY","reason":""}])";
  }
  void load(const std::string& model, const std::string& config_json, std::function<void(triton::Status)> done) override {
    last_load_config = config_json;
    std::thread([done, model] { done(model == "tiny" ? triton::Status{} : triton::Status{Code::kNotFound, "no"}); })
        .detach();
  }
  triton::Status unload(const std::string&) override { return {}; }
  triton::Status shm_register(const std::string& name, const std::string& key, uint64_t offset,
                              uint64_t byte_size) override {
    last_register = name + "|" + key + "|" + std::to_string(offset) + "|" + std::to_string(byte_size);
    return name == "dup" ? triton::Status{Code::kAlreadyExists, "region \"dup\" is registered"} : triton::Status{};
  }
  triton::Status shm_unregister(const std::string&) override { return {Code::kPermissionDenied, "disabled"}; }
  triton::Result<std::string> shm_status_json(const std::string&) override {
    return {{}, R"([{"name":"r1","key":"/k1","offset":0,"byte_size":64},{"name":"r2","key":"/k2","offset":8,"byte_size":16}])"};
  }
  triton::Result<ModelView> model_view(const std::string& model, const std::string&) override {
    if (model != "tiny") return {{Code::kNotFound, "no model \"" + model + "\""}, {}};
    return {{}, {small_model(), 8}};
  }
  std::shared_ptr<triton::InferCall> infer(triton::InferInput&& input, triton::InferDone done) override {
    auto call = std::make_shared<FakeCall>(std::move(done));
    std::unique_lock<std::mutex> lock(mu_);
    inputs.push_back(input);
    calls.push_back(call);
    if (refuse != Code::kOk) {
      lock.unlock();
      call->answer({refuse, "refused by the fake"}, {});
      return call;
    }
    if (hold) return call;  // answered later (or cancelled)
    lock.unlock();
    triton::InferOutput out;
    out.model = input.model;
    out.version = "1";
    out.id = input.tensor.id;
    out.labels = 2;
    for (const auto& item : input.tensor.items) out.scores.push_back({item[0] * 2, item[3] + 1});
    out.output_shm = input.output_shm;
    if (out.output_shm) out.scores.clear();
    call->answer({}, std::move(out));
    return call;
  }
  void observe(const std::string& protocol, const std::string& endpoint, int code, double) override {
    std::lock_guard<std::mutex> lock(mu_);
    observed.push_back(protocol + " " + endpoint + " " + std::to_string(code));
  }

  std::mutex mu_;
  std::vector<triton::InferInput> inputs;
  std::vector<std::shared_ptr<FakeCall>> calls;
  std::vector<std::string> observed;
  Code refuse = Code::kOk;
  bool hold = false;
  bool unloaded = false;
  bool last_ready_only = false;
  std::string last_load_config, last_register;
};

using Stub = inference::GRPCInferenceService::Stub;

class GrpcAdapterTest : public ::testing::Test {
 protected:
  void start(GrpcOptions options = {"127.0.0.1:0", -1, 1 << 20}) {
    server_ = std::make_unique<GrpcServer>(fake_, options);
    server_->start();
    const int port = server_->port() ? server_->port() : listen_port_;
    ::grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(-1);
    channel_ = ::grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), ::grpc::InsecureChannelCredentials(), args);
    stub_ = inference::GRPCInferenceService::NewStub(channel_);
  }
  void TearDown() override {
    if (server_) server_->stop(std::chrono::milliseconds(0));
  }

  static inference::ModelInferRequest raw_request(const std::vector<float>& data, int64_t batch) {
    inference::ModelInferRequest r;
    r.set_model_name("tiny");
    r.set_id("req-1");
    auto* in = r.add_inputs();
    in->set_name("input");
    in->set_datatype("FP32");
    in->add_shape(batch);
    in->add_shape(4);
    r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float)));
    return r;
  }
  ::grpc::Status infer(const inference::ModelInferRequest& request, inference::ModelInferResponse& response,
                       std::chrono::milliseconds deadline = std::chrono::seconds(30)) {
    ::grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + deadline);
    return stub_->ModelInfer(&ctx, request, &response);
  }
  static std::vector<float> floats(const std::string& raw) {
    std::vector<float> f(raw.size() / sizeof(float));
    std::memcpy(f.data(), raw.data(), f.size() * sizeof(float));
    return f;
  }

  FakeService fake_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<::grpc::Channel> channel_;
  std::unique_ptr<Stub> stub_;
  int listen_port_ = 0;
};

TEST_F(GrpcAdapterTest, RawInputContentsBecomeItemsAndScoresComeBackAsRawOutputContents) {
  start();
  inference::ModelInferResponse response;
  const auto s = infer(raw_request({1, 2, 3, 4, 5, 6, 7, 8}, 2), response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(fake_.inputs.size(), 1u);
  const triton::InferInput& in = fake_.inputs[0];
  EXPECT_EQ(in.protocol, "grpc");
  EXPECT_EQ(in.tensor.batch, 2);
  ASSERT_EQ(in.tensor.items.size(), 2u);
  EXPECT_EQ(in.tensor.items[1], (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(response.model_name(), "tiny");
  EXPECT_EQ(response.id(), "req-1");
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).name(), "scores");
  EXPECT_EQ(response.outputs(0).datatype(), "FP32");
  EXPECT_EQ(std::vector<int64_t>(response.outputs(0).shape().begin(), response.outputs(0).shape().end()),
            (std::vector<int64_t>{2, 2}));
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_EQ(floats(response.raw_output_contents(0)), (std::vector<float>{2, 5, 10, 9}));
}

TEST_F(GrpcAdapterTest, TypedFp32ContentsGiveTheSameItemsAsRaw) {
  start();
  inference::ModelInferRequest r = raw_request({}, 1);
  r.clear_raw_input_contents();
  for (float v : {1.5f, 2.f, 3.f, 4.f}) r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(v);
  inference::ModelInferResponse response;
  ASSERT_TRUE(infer(r, response).ok());
  EXPECT_EQ(fake_.inputs.at(0).tensor.items.at(0), (std::vector<float>{1.5f, 2, 3, 4}));
  EXPECT_EQ(floats(response.raw_output_contents(0)), (std::vector<float>{3, 5}));
}

TEST_F(GrpcAdapterTest, MalformedRequestsAreInvalidArgumentNamingTheFieldAndNeverReachTheService) {
  start();
  struct Case {
    std::function<void(inference::ModelInferRequest&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](auto& r) { r.mutable_inputs(0)->set_shape(1, 5); }, "inputs[0].shape"},
      {[](auto& r) { r.mutable_inputs(0)->set_datatype("INT32"); }, "inputs[0].datatype"},
      {[](auto& r) { r.mutable_inputs(0)->set_name("x"); }, "inputs[0].name"},
      {[](auto& r) { r.set_raw_input_contents(0, "abc"); }, "raw_input_contents[0]"},
      {[](auto& r) { r.add_raw_input_contents("abcd"); }, "raw_input_contents"},
      {[](auto& r) { r.clear_raw_input_contents(); }, "no data"},
      {[](auto& r) { r.add_inputs()->set_name("input"); }, "inputs"},
      {[](auto& r) { r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1); }, "inputs[0].contents"},
      {[](auto& r) { r.add_outputs()->set_name("logits"); }, "outputs[0].name"},
      {[](auto& r) { r.set_model_name(""); }, "model_name"},
      {[](auto& r) { (*r.mutable_inputs(0)->mutable_parameters())["shared_memory_region"].set_string_param("r"); },
       "shared_memory_byte_size"},
  };
  for (const Case& c : cases) {
    inference::ModelInferRequest r = raw_request({1, 2, 3, 4}, 1);
    c.edit(r);
    inference::ModelInferResponse response;
    const auto s = infer(r, response);
    EXPECT_EQ(s.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT) << c.message;
    EXPECT_NE(s.error_message().find(c.message), std::string::npos) << s.error_message();
  }
  EXPECT_TRUE(fake_.inputs.empty());
}

TEST_F(GrpcAdapterTest, ServiceCodesMapToTheGrpcCodeOfTheSameName) {
  start();
  inference::ModelInferResponse response;
  inference::ModelInferRequest r = raw_request({1, 2, 3, 4}, 1);
  r.set_model_name("nope");
  EXPECT_EQ(infer(r, response).error_code(), ::grpc::StatusCode::NOT_FOUND);
  const std::pair<Code, ::grpc::StatusCode> pairs[] = {
      {Code::kResourceExhausted, ::grpc::StatusCode::RESOURCE_EXHAUSTED},
      {Code::kUnavailable, ::grpc::StatusCode::UNAVAILABLE},
      {Code::kDeadlineExceeded, ::grpc::StatusCode::DEADLINE_EXCEEDED},
      {Code::kInternal, ::grpc::StatusCode::INTERNAL},
      {Code::kPermissionDenied, ::grpc::StatusCode::PERMISSION_DENIED},
      {Code::kInvalidArgument, ::grpc::StatusCode::INVALID_ARGUMENT},
  };
  for (const auto& [code, grpc_code] : pairs) {
    fake_.refuse = code;
    const auto s = infer(raw_request({1, 2, 3, 4}, 1), response);
    EXPECT_EQ(s.error_code(), grpc_code);
    EXPECT_EQ(s.error_message(), "refused by the fake");
  }
}

TEST_F(GrpcAdapterTest, ClientDeadlineReachesTheServiceAndNoDeadlineLeavesItsDefault) {
  start();
  inference::ModelInferResponse response;
  const auto before = std::chrono::steady_clock::now();
  ASSERT_TRUE(infer(raw_request({1, 2, 3, 4}, 1), response, std::chrono::seconds(7)).ok());
  ASSERT_TRUE(fake_.inputs.at(0).deadline.has_value());
  const auto left = *fake_.inputs[0].deadline - before;
  EXPECT_GT(left, std::chrono::seconds(6));
  EXPECT_LE(left, std::chrono::seconds(8));
  ::grpc::ClientContext ctx;  // no deadline
  ASSERT_TRUE(stub_->ModelInfer(&ctx, raw_request({1, 2, 3, 4}, 1), &response).ok());
  EXPECT_FALSE(fake_.inputs.at(1).deadline.has_value());
}

TEST_F(GrpcAdapterTest, CancelledCallCancelsItsInferCall) {
  start();
  fake_.hold = true;
  ::grpc::ClientContext ctx;
  inference::ModelInferResponse response;
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  ::grpc::Status status;
  const inference::ModelInferRequest request = raw_request({1, 2, 3, 4}, 1);
  stub_->async()->ModelInfer(&ctx, &request, &response, [&](::grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = s;
    finished = true;
    cv.notify_all();
  });
  ASSERT_TRUE(testing::wait_until(
      [&] {
        std::lock_guard<std::mutex> lock(fake_.mu_);
        return !fake_.calls.empty();
      },
      std::chrono::seconds(30)));
  EXPECT_FALSE(fake_.calls[0]->cancelled);
  ctx.TryCancel();
  EXPECT_TRUE(testing::wait_until([&] { return fake_.calls[0]->cancelled.load(); }, std::chrono::seconds(30)));
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return finished; }));
  EXPECT_EQ(status.error_code(), ::grpc::StatusCode::CANCELLED);
}

TEST_F(GrpcAdapterTest, PassedDeadlineCancelsTheInferCallToo) {
  start();
  fake_.hold = true;
  inference::ModelInferResponse response;
  const auto s = infer(raw_request({1, 2, 3, 4}, 1), response, std::chrono::milliseconds(200));
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(testing::wait_until(
      [&] {
        std::lock_guard<std::mutex> lock(fake_.mu_);
        return !fake_.calls.empty() && fake_.calls[0]->cancelled.load();
      },
      std::chrono::seconds(30)));
}

TEST_F(GrpcAdapterTest, MessageOverTheLimitIsResourceExhaustedAndTheServerStaysUp) {
  start({"127.0.0.1:0", -1, 64 << 10});
  inference::ModelInferResponse response;
  inference::ModelInferRequest big = raw_request({1, 2, 3, 4}, 1);
  big.set_id(std::string(100 << 10, 'x'));
  EXPECT_EQ(infer(big, response).error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(infer(raw_request({1, 2, 3, 4}, 1), response).ok());
}

TEST_F(GrpcAdapterTest, SharedMemoryParametersBecomeShmRefs) {
  start();
  inference::ModelInferRequest r = raw_request({}, 2);
  r.clear_raw_input_contents();
  auto& in = *r.mutable_inputs(0)->mutable_parameters();
  in["shared_memory_region"].set_string_param("in_region");
  in["shared_memory_offset"].set_int64_param(16);
  in["shared_memory_byte_size"].set_int64_param(32);
  auto* out = r.add_outputs();
  out->set_name("scores");
  (*out->mutable_parameters())["shared_memory_region"].set_string_param("out_region");
  (*out->mutable_parameters())["shared_memory_byte_size"].set_int64_param(16);
  inference::ModelInferResponse response;
  ASSERT_TRUE(infer(r, response).ok());
  const triton::InferInput& got = fake_.inputs.at(0);
  ASSERT_TRUE(got.input_shm && got.input_header && got.output_shm);
  EXPECT_EQ(got.input_shm->region, "in_region");
  EXPECT_EQ(got.input_shm->offset, 16u);
  EXPECT_EQ(got.input_shm->byte_size, 32u);
  EXPECT_EQ(got.input_header->shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(got.output_shm->region, "out_region");
  EXPECT_EQ(response.raw_output_contents_size(), 0);
  EXPECT_EQ(response.outputs(0).shape(0), 2);
  EXPECT_EQ(response.outputs(0).parameters().at("shared_memory_region").string_param(), "out_region");
}

TEST_F(GrpcAdapterTest, JsonAnswersBecomeTheirMessages) {
  start();
  {
    ::grpc::ClientContext ctx;
    inference::ModelConfigRequest req;
    req.set_name("tiny");
    inference::ModelConfigResponse resp;
    ASSERT_TRUE(stub_->ModelConfig(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.config().max_batch_size(), 8);
    EXPECT_EQ(resp.config().input(0).data_type(), inference::TYPE_FP32);
    EXPECT_EQ(resp.config().instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
    EXPECT_EQ(resp.config().dynamic_batching().max_queue_delay_microseconds(), 100u);
    EXPECT_EQ(resp.config().parameters().at("mode").string_value(), "thread");
  }
  {
    ::grpc::ClientContext ctx;
    inference::ModelStatisticsResponse resp;
    ASSERT_TRUE(stub_->ModelStatistics(&ctx, {}, &resp).ok());
    EXPECT_EQ(resp.model_stats(0).inference_count(), 12345678901u);
    EXPECT_EQ(resp.model_stats(0).inference_stats().success().ns(), 900u);
    EXPECT_EQ(resp.model_stats(0).batch_stats(0).batch_size(), 2u);
  }
  {
    ::grpc::ClientContext ctx;
    inference::RepositoryIndexRequest req;
    req.set_ready(true);
    inference::RepositoryIndexResponse resp;
    ASSERT_TRUE(stub_->RepositoryIndex(&ctx, req, &resp).ok());
    EXPECT_TRUE(fake_.last_ready_only);
    ASSERT_EQ(resp.models_size(), 1);
    EXPECT_EQ(resp.models(0).state(), "READY");
  }
  {
    ::grpc::ClientContext ctx;
    inference::SystemSharedMemoryStatusResponse resp;
    ASSERT_TRUE(stub_->SystemSharedMemoryStatus(&ctx, {}, &resp).ok());
    ASSERT_EQ(resp.regions_size(), 2);
    EXPECT_EQ(resp.regions().at("r2").offset(), 8u);
    EXPECT_EQ(resp.regions().at("r2").key(), "/k2");
  }
  {
    ::grpc::ClientContext ctx;
    inference::ServerMetadataResponse resp;
    ASSERT_TRUE(stub_->ServerMetadata(&ctx, {}, &resp).ok());
    EXPECT_EQ(resp.extensions_size(), 2);
  }
  {
    ::grpc::ClientContext ctx;
    inference::ModelMetadataRequest req;
    req.set_name("tiny");
    inference::ModelMetadataResponse resp;
    ASSERT_TRUE(stub_->ModelMetadata(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.inputs(0).shape(1), 4);
  }
}

TEST_F(GrpcAdapterTest, RepositoryAndSharedMemoryCallsPassTheirArgumentsAndCodes) {
  start();
  {
    ::grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("tiny");
    (*req.mutable_parameters())["config"].set_string_param(R"({"max_batch":4})");
    inference::RepositoryModelLoadResponse resp;
    EXPECT_TRUE(stub_->RepositoryModelLoad(&ctx, req, &resp).ok());
    EXPECT_EQ(fake_.last_load_config, R"({"max_batch":4})");
  }
  {
    ::grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("tiny");
    (*req.mutable_parameters())["file:1/model.pt"].set_bytes_param("x");
    inference::RepositoryModelLoadResponse resp;
    EXPECT_EQ(stub_->RepositoryModelLoad(&ctx, req, &resp).error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    ::grpc::ClientContext ctx;
    inference::SystemSharedMemoryRegisterRequest req;
    req.set_name("dup");
    req.set_key("/k");
    req.set_offset(3);
    req.set_byte_size(9);
    inference::SystemSharedMemoryRegisterResponse resp;
    EXPECT_EQ(stub_->SystemSharedMemoryRegister(&ctx, req, &resp).error_code(), ::grpc::StatusCode::ALREADY_EXISTS);
    EXPECT_EQ(fake_.last_register, "dup|/k|3|9");
  }
  {
    ::grpc::ClientContext ctx;
    inference::SystemSharedMemoryUnregisterResponse resp;
    EXPECT_EQ(stub_->SystemSharedMemoryUnregister(&ctx, {}, &resp).error_code(),
              ::grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    ::grpc::ClientContext ctx;
    inference::CudaSharedMemoryStatusResponse resp;
    EXPECT_EQ(stub_->CudaSharedMemoryStatus(&ctx, {}, &resp).error_code(), ::grpc::StatusCode::UNIMPLEMENTED);
  }
  {
    ::grpc::ClientContext ctx;
    inference::ModelReadyRequest req;
    req.set_name("nope");
    inference::ModelReadyResponse resp;
    EXPECT_EQ(stub_->ModelReady(&ctx, req, &resp).error_code(), ::grpc::StatusCode::NOT_FOUND);
  }
  fake_.unloaded = true;
  ::grpc::ClientContext ctx;
  inference::ModelReadyRequest req;
  req.set_name("tiny");
  inference::ModelReadyResponse resp;
  resp.set_ready(true);
  ASSERT_TRUE(stub_->ModelReady(&ctx, req, &resp).ok());
  EXPECT_FALSE(resp.ready());
}

TEST_F(GrpcAdapterTest, EveryAnswerIsObservedUnderProtocolGrpc) {
  start();
  ::grpc::ClientContext ctx;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(&ctx, {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ModelInferResponse response;
  fake_.refuse = Code::kResourceExhausted;
  infer(raw_request({1, 2, 3, 4}, 1), response);
  std::lock_guard<std::mutex> lock(fake_.mu_);
  EXPECT_EQ(fake_.observed,
            (std::vector<std::string>{"grpc live 0",
                                      "grpc infer " + std::to_string(int(::grpc::StatusCode::RESOURCE_EXHAUSTED))}));
}

// Socket activation without systemd: a listening socket of ours stands in for
// the one systemd passes; the server has no address of its own.
TEST_F(GrpcAdapterTest, ConnectionsOnAnInheritedListenerAreServed) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  listen_port_ = ntohs(addr.sin_port);
  start({"", fd, 1 << 20});
  EXPECT_EQ(server_->port(), 0);
  for (int i = 0; i < 3; ++i) {  // a fresh channel each time: one connection accepted each
    auto channel = ::grpc::CreateChannel("127.0.0.1:" + std::to_string(listen_port_), ::grpc::InsecureChannelCredentials());
    auto stub = inference::GRPCInferenceService::NewStub(channel);
    ::grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    inference::ModelInferResponse response;
    const auto s = stub->ModelInfer(&ctx, raw_request({1, 2, 3, 4}, 1), &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
}

TEST_F(GrpcAdapterTest, StopCancelsCallsStillInFlightAfterTheDrain) {
  start();
  fake_.hold = true;
  ::grpc::ClientContext ctx;
  inference::ModelInferResponse response;
  std::atomic<bool> finished{false};
  ::grpc::Status status;
  const inference::ModelInferRequest request = raw_request({1, 2, 3, 4}, 1);
  stub_->async()->ModelInfer(&ctx, &request, &response, [&](::grpc::Status s) {
    status = s;
    finished = true;
  });
  ASSERT_TRUE(testing::wait_until(
      [&] {
        std::lock_guard<std::mutex> lock(fake_.mu_);
        return !fake_.calls.empty();
      },
      std::chrono::seconds(30)));
  server_->stop(std::chrono::milliseconds(100));
  EXPECT_TRUE(fake_.calls[0]->cancelled);
  EXPECT_TRUE(testing::wait_until([&] { return finished.load(); }, std::chrono::seconds(30)));
  EXPECT_FALSE(status.ok());
}

TEST_F(GrpcAdapterTest, AnAddressInUseIsReportedNotFatal) {
  start();
  const std::string taken = "127.0.0.1:" + std::to_string(server_->port());
  GrpcServer second(fake_, {taken, -1, 1 << 20});
  try {
    second.start();
    FAIL() << "a second server bound " << taken;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(taken), std::string::npos) << e.what();
  }
}

// ---- ModelStreamInfer ----------------------------------------------------------

// Streams that answer each piece with one event ({"bytes": n}) and each
// flushing end with a summary ({"bytes": total}), at once, on the caller's
// thread; what a real StreamSession does later, on its own.
class FakeStream final : public AudioStream {
 public:
  explicit FakeStream(std::unique_ptr<StreamOutput> output) : output_(std::move(output)) {}
  void start() override {}
  void push(std::string&& pcm) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!output_) return;
    total_ += pcm.size();
    output_->event("{\"bytes\":" + std::to_string(pcm.size()) + "}");
  }
  void end(StreamEnd how, std::string reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!output_) return;
    output_->close(how, reason, flushes(how) ? "{\"bytes\":" + std::to_string(total_) + "}" : "");
    output_.reset();
  }
  void dropped() override {}

 private:
  std::mutex mu_;
  std::unique_ptr<StreamOutput> output_;
  size_t total_ = 0;
};

class FakeStreams final : public AudioStreams {
 public:
  Opened open(const std::string& model, std::string_view pcm_query, std::unique_ptr<StreamOutput> output) override {
    std::lock_guard<std::mutex> lock(mu_);
    queries.emplace_back(pcm_query);
    if (model != "tiny") return {{Code::kNotFound, "model \"" + model + "\" not found"}, nullptr};
    if (pcm_query.find("sample_rate=5&") != std::string_view::npos) {
      return {{Code::kInvalidArgument, "sample_rate: \"5\" is not in 1000..384000"}, nullptr};
    }
    if (int(streams.size()) >= cap) return {{Code::kResourceExhausted, "too many streams"}, nullptr};
    streams.push_back(std::make_shared<FakeStream>(std::move(output)));
    return {{}, streams.back()};
  }
  std::mutex mu_;
  std::vector<std::string> queries;
  std::vector<std::shared_ptr<FakeStream>> streams;
  int cap = 100;
};

class GrpcStreamTest : public GrpcAdapterTest {
 protected:
  void SetUp() override {
    GrpcOptions options;
    options.listen = "127.0.0.1:0";
    options.max_message_bytes = 1 << 20;
    options.streams = &streams_;
    options.doors = &doors_;  // a token set, and no test sends it: streams pass no door, like ModelInfer
    start(options);
  }

  // One request of a stream: `samples` INT16 (or FP32) samples of `sequence`.
  static inference::ModelInferRequest chunk(int64_t sequence, size_t samples, bool start, bool end,
                                            const char* datatype = "INT16") {
    inference::ModelInferRequest r;
    r.set_model_name("tiny");
    r.set_id("r" + std::to_string(sequence));
    auto& params = *r.mutable_parameters();
    params["sequence_id"].set_int64_param(sequence);
    params["sequence_start"].set_bool_param(start);
    params["sequence_end"].set_bool_param(end);
    if (start) params["sample_rate"].set_int64_param(16000);
    auto* in = r.add_inputs();
    in->set_name("AUDIO");
    in->set_datatype(datatype);
    in->add_shape(int64_t(samples));
    r.add_raw_input_contents(std::string(samples * (std::string(datatype) == "FP32" ? 4 : 2), '\0'));
    return r;
  }

  // Writes the requests on one stream, closes the sending side, reads every response.
  ::grpc::Status exchange(const std::vector<inference::ModelInferRequest>& requests,
                          std::vector<inference::ModelStreamInferResponse>& responses) {
    ::grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto stream = stub_->ModelStreamInfer(&ctx);
    for (const auto& r : requests) EXPECT_TRUE(stream->Write(r));
    stream->WritesDone();
    inference::ModelStreamInferResponse response;
    while (stream->Read(&response)) responses.push_back(response);
    return stream->Finish();
  }

  // The text of a response's BYTES output `name` ("" when it has none).
  static std::string bytes_output(const inference::ModelStreamInferResponse& r, const std::string& name) {
    const auto& response = r.infer_response();
    for (int i = 0; i < response.outputs_size(); ++i) {
      if (response.outputs(i).name() != name) continue;
      const std::string& raw = response.raw_output_contents(i);
      uint32_t n = 0;
      std::memcpy(&n, raw.data(), 4);
      EXPECT_EQ(raw.size(), 4 + n);
      return raw.substr(4, n);
    }
    return "";
  }
  static bool final_flag(const inference::ModelStreamInferResponse& r) {
    const auto& params = r.infer_response().parameters();
    auto it = params.find("triton_final_response");
    return it != params.end() && it->second.bool_param();
  }

  FakeStreams streams_;
  triton::Doors doors_{"s3cret", false};
};

TEST_F(GrpcStreamTest, TwoSequencesOnOneStreamGetTheirOwnEventsThenEachAFinalResponse) {
  std::vector<inference::ModelStreamInferResponse> responses;
  const auto status = exchange({chunk(1, 10, true, false), chunk(2, 3, true, false, "FP32"), chunk(1, 20, false, false),
                                chunk(2, 4, false, true, "FP32"), chunk(1, 30, false, true)},
                               responses);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::map<int64_t, std::vector<std::string>> by_sequence;
  for (const auto& r : responses) {
    ASSERT_EQ(r.error_message(), "");
    const int64_t seq = r.infer_response().parameters().at("sequence_id").int64_param();
    EXPECT_EQ(r.infer_response().id(), "r" + std::to_string(seq));
    EXPECT_EQ(r.infer_response().model_name(), "tiny");
    by_sequence[seq].push_back(final_flag(r) ? "final " + bytes_output(r, "SUMMARY") : bytes_output(r, "EVENT"));
  }
  EXPECT_EQ(by_sequence[1], (std::vector<std::string>{"{\"bytes\":20}", "{\"bytes\":40}", "{\"bytes\":60}",
                                                      "final {\"bytes\":120}"}));
  EXPECT_EQ(by_sequence[2], (std::vector<std::string>{"{\"bytes\":12}", "{\"bytes\":16}", "final {\"bytes\":28}"}));
  std::lock_guard<std::mutex> lock(streams_.mu_);
  EXPECT_EQ(streams_.queries,
            (std::vector<std::string>{"sample_rate=16000&format=s16le", "sample_rate=16000&format=f32le"}));
  EXPECT_EQ(doors_.refused_unauthenticated(), 0u);
}

TEST_F(GrpcStreamTest, ClosingTheSendingSideEndsTheSequencesStillOpenWithTheirFinalResponse) {
  std::vector<inference::ModelStreamInferResponse> responses;
  ASSERT_TRUE(exchange({chunk(7, 5, true, false)}, responses).ok());
  ASSERT_EQ(responses.size(), 2u);
  EXPECT_TRUE(final_flag(responses[1]));
  EXPECT_EQ(bytes_output(responses[1], "SUMMARY"), "{\"bytes\":10}");
}

TEST_F(GrpcStreamTest, BadChunksGetAnErrorMessageNamingWhatAndWhereAndTheStreamGoesOn) {
  struct Case {
    std::function<void(inference::ModelInferRequest&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](auto& r) { r.mutable_parameters()->erase("sequence_start"); }, "sequence 3: no such sequence open"},
      {[](auto& r) { r.mutable_inputs(0)->set_datatype("INT32"); }, "sequence 3, request \"r3\": inputs[0].datatype"},
      {[](auto& r) { r.set_raw_input_contents(0, "abc"); }, "raw_input_contents[0]: 3 bytes are not whole INT16"},
      {[](auto& r) { r.mutable_inputs(0)->set_shape(0, 99); }, "inputs[0].shape"},
      {[](auto& r) { r.mutable_inputs(0)->set_name("input"); }, "inputs[0].name"},
      {[](auto& r) { r.set_model_name("nope"); }, "sequence 3: model \"nope\" not found"},
      {[](auto& r) { r.mutable_parameters()->erase("sequence_id"); }, "parameters.sequence_id: missing"},
      {[](auto& r) { (*r.mutable_parameters())["sequence_id"].set_int64_param(0); }, "parameters.sequence_id: 0"},
      {[](auto& r) { (*r.mutable_parameters())["sequence_end"].set_string_param("yes"); },
       "parameters.sequence_end: must be a bool_param"},
      {[](auto& r) { (*r.mutable_parameters())["sample_rate"].set_int64_param(5); },
       "sequence 3: parameters: sample_rate: \"5\" is not in"},
      {[](auto& r) { r.clear_raw_input_contents(); }, "raw_input_contents: the audio goes there"},
  };
  for (const Case& c : cases) {
    inference::ModelInferRequest bad = chunk(3, 4, true, false);
    c.edit(bad);
    std::vector<inference::ModelStreamInferResponse> responses;
    // The bad request, then a whole good sequence on the same stream.
    ASSERT_TRUE(exchange({bad, chunk(4, 2, true, true)}, responses).ok()) << c.message;
    ASSERT_EQ(responses.size(), 3u) << c.message;
    EXPECT_NE(responses[0].error_message().find(c.message), std::string::npos)
        << responses[0].error_message() << " should say " << c.message;
    EXPECT_EQ(bytes_output(responses[2], "SUMMARY"), "{\"bytes\":4}") << c.message;
  }
}

TEST_F(GrpcStreamTest, ASecondStartOfAnOpenSequenceAndAChangeOfDatatypeAreRefused) {
  std::vector<inference::ModelStreamInferResponse> responses;
  ASSERT_TRUE(exchange({chunk(5, 1, true, false), chunk(5, 1, true, false), chunk(5, 1, false, false, "FP32"),
                        chunk(5, 1, false, true)},
                       responses)
                  .ok());
  std::vector<std::string> errors;
  for (const auto& r : responses) {
    if (!r.error_message().empty()) errors.push_back(r.error_message());
  }
  EXPECT_EQ(errors, (std::vector<std::string>{
                        "sequence 5: sequence_start, but the sequence is open already",
                        "sequence 5: inputs[0].datatype: FP32, but the sequence started as INT16"}));
  EXPECT_EQ(bytes_output(responses.back(), "SUMMARY"), "{\"bytes\":4}");
}

TEST_F(GrpcStreamTest, AStreamEndedByTheServerSaysWhyInAnErrorMessage) {
  streams_.cap = 1;
  ::grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  ASSERT_TRUE(stream->Write(chunk(1, 1, true, false)));
  ASSERT_TRUE(stream->Write(chunk(2, 1, true, false)));  // over the cap
  inference::ModelStreamInferResponse response;
  std::vector<std::string> errors;
  for (int i = 0; i < 2 && stream->Read(&response); ++i) {
    if (!response.error_message().empty()) errors.push_back(response.error_message());
  }
  EXPECT_EQ(errors, (std::vector<std::string>{"sequence 2: too many streams"}));
  {
    std::lock_guard<std::mutex> lock(streams_.mu_);
    streams_.streams[0]->end(StreamEnd::kBadAudio, "not whole frames");
  }
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.error_message(), "sequence 1: bad_audio: not whole frames");
  stream->WritesDone();
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(GrpcStreamTest, ACancelledCallEndsItsSequencesAsGone) {
  auto ctx = std::make_unique<::grpc::ClientContext>();
  auto stream = stub_->ModelStreamInfer(ctx.get());
  ASSERT_TRUE(stream->Write(chunk(1, 1, true, false)));
  inference::ModelStreamInferResponse response;
  ASSERT_TRUE(stream->Read(&response));  // the first event: the sequence is open
  ctx->TryCancel();
  EXPECT_EQ(stream->Finish().error_code(), ::grpc::StatusCode::CANCELLED);
  // The call ends on the server too (OnDone), which it can only once the sequence's output was closed.
  EXPECT_TRUE(testing::wait_until(
      [&] {
        std::lock_guard<std::mutex> lock(fake_.mu_);
        return std::find(fake_.observed.begin(), fake_.observed.end(),
                         "grpc stream_infer " + std::to_string(int(::grpc::StatusCode::CANCELLED))) !=
               fake_.observed.end();
      },
      std::chrono::seconds(30)));
}

TEST(GrpcStreamChunk, SequenceParametersAndTheFormatBecomeAChunk) {
  inference::ModelInferRequest r;
  r.set_model_name("m");
  auto& params = *r.mutable_parameters();
  params["sequence_id"].set_string_param("mic-1");
  params["sequence_start"].set_bool_param(true);
  params["sample_rate"].set_int64_param(44100);
  params["channels"].set_int64_param(2);
  auto* in = r.add_inputs();
  in->set_name("AUDIO");
  in->set_datatype("FP32");
  in->add_shape(2);
  in->add_shape(2);
  r.add_raw_input_contents(std::string(16, '\1'));
  const grpc_api::StreamChunk c = grpc_api::to_stream_chunk(r);
  EXPECT_EQ(c.sequence_name, "\"mic-1\"");
  EXPECT_TRUE(c.start);
  EXPECT_FALSE(c.end);
  EXPECT_EQ(c.pcm_query, "sample_rate=44100&channels=2&format=f32le");
  EXPECT_EQ(c.pcm.size(), 16u);
  // An end alone needs no input.
  params["sequence_start"].set_bool_param(false);
  params["sequence_end"].set_bool_param(true);
  r.clear_inputs();
  r.clear_raw_input_contents();
  const grpc_api::StreamChunk end = grpc_api::to_stream_chunk(r);
  EXPECT_TRUE(end.end);
  EXPECT_TRUE(end.pcm.empty());
}

}  // namespace
}  // namespace corepool
