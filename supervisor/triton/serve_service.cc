// Every call looks the model up in the current generation, so a reload
// (which may rename the model) is seen by the next request; the answers are
// built by the pure JSON functions (inference_protocol.h, triton_json.h,
// model_statistics.h). Nothing here blocks: infer hands its items to the
// executor, load hands the reload to the main thread.
#include "supervisor/triton/serve_service.h"

#include <algorithm>
#include <regex>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "supervisor/triton/stateful_refusal.h"
#include "supervisor/triton/client_shm_io.h"
#include "supervisor/triton/inference_protocol.h"
#include "supervisor/triton/triton_json.h"

namespace corepool {
namespace {

using json = nlohmann::json;
using triton::Code;
using triton::Status;

// A call answered before it started (unknown model, bad input, deadline
// already past): nothing to cancel.
class AnsweredCall final : public triton::InferCall {
 public:
  void cancel() override {}
};

// parameters.config of a load request (a JSON object of [engine] keys) as a
// TOML [engine] table for override_engine_keys; kInvalidArgument names the key.
triton::Result<std::string> engine_toml_of(const std::string& config_json) {
  const std::string where = "parameters.config";
  const json object = json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded() || !object.is_object()) {
    return {{Code::kInvalidArgument, where + ": must be a JSON object of [engine] keys, e.g. {\"max_batch\": 4}"}};
  }
  static const std::regex kKey("[a-z][a-z0-9_]*");
  std::string toml = "[engine]\n";
  for (const auto& [key, value] : object.items()) {
    const std::string bare = key.rfind("engine.", 0) == 0 ? key.substr(7) : key;
    if (!std::regex_match(bare, kKey)) {
      return {{Code::kInvalidArgument, where + ": \"" + key + "\" is not an [engine] key"}};
    }
    if (!value.is_number() && !value.is_boolean() && !value.is_string()) {
      return {{Code::kInvalidArgument, where + "." + key + ": must be a number, a boolean or a string"}};
    }
    toml += bare + " = " + value.dump() + "\n";
  }
  return {{}, toml};
}

// The items an adapter parsed, checked once more: a wire may not have checked the batch bound.
Status check_items(Generation& gen, const std::vector<std::vector<float>>& items) {
  const ModelConfig& config = gen.model().config;
  const int64_t max_batch = std::min<int64_t>(config.max_batch, static_cast<int64_t>(gen.executor().stats().depth));
  if (items.empty() || static_cast<int64_t>(items.size()) > max_batch) {
    return {Code::kInvalidArgument, "inputs[0].shape: batch " + std::to_string(items.size()) +
                                        ", the model takes 1.." + std::to_string(max_batch)};
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (static_cast<int64_t>(items[i].size()) != config.item_floats()) {
      return {Code::kInvalidArgument, "inputs[0]: item " + std::to_string(i) + " has " +
                                          std::to_string(items[i].size()) + " values, the model takes " +
                                          std::to_string(config.item_floats())};
    }
  }
  return {};
}

struct Deadline {
  Status status;  // kDeadlineExceeded: the client's passed already
  std::optional<ServeInferCall::Clock::time_point> at;
  std::string source;  // which one it is, for the 504's message
};

// serve.request_timeout_s from now, or the client's deadline when it is earlier:
// a client may shorten the server's deadline, never lengthen it.
Deadline deadline_of(const Generation& gen, std::optional<ServeInferCall::Clock::time_point> client) {
  const auto now = ServeInferCall::Clock::now();
  Deadline d;
  if (const int timeout_s = gen.config().request_timeout_s; timeout_s > 0) {
    d.at = now + std::chrono::seconds(timeout_s);
    d.source = "serve.request_timeout_s = " + std::to_string(timeout_s) + " s";
  }
  if (!client || (d.at && *client >= *d.at)) return d;
  if (*client <= now) {
    d.status = {Code::kDeadlineExceeded, "the client's deadline passed before the request was admitted"};
    return d;
  }
  d.at = client;
  d.source = "the client's deadline (" +
             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(*client - now).count()) + " ms)";
  return d;
}

}  // namespace

namespace {

std::unique_ptr<triton::ClientShmRegistry> make_registry(const triton::ClientShmOptions& options) {
  auto made = triton::ClientShmRegistry::create(options);
  if (!made.status.ok()) throw ConfigError("serve.client_shm_group: " + made.status.message);
  return std::move(made.value);
}

}  // namespace

ServeService::ServeService(ServeHost& host, ServeMetrics& metrics, const triton::ClientShmOptions& client_shm)
    : host_(host), metrics_(metrics), shm_(make_registry(client_shm)) {}

ServeService::~ServeService() = default;

std::shared_ptr<ModelStatistics> ServeService::statistics() const {
  return std::shared_ptr<ModelStatistics>(counters_, &counters_->stats);
}

triton::Result<std::shared_ptr<Generation>> ServeService::find(const std::string& model, const std::string& version) {
  std::shared_ptr<Generation> gen = host_.current();
  const std::string& name = gen->model().config.name;
  if (model != name || (!version.empty() && version != oip::kModelVersion)) {
    return {{Code::kNotFound, "no model \"" + model + "\"" + (version.empty() ? "" : " version " + version) +
                                  "; this server serves \"" + name + "\" version " + oip::kModelVersion}};
  }
  return {{}, std::move(gen)};
}

bool ServeService::server_ready() { return !lame_duck_.load() && host_.current()->executor().stats().all_ready; }

Status ServeService::model_ready(const std::string& model, const std::string& version) {
  auto gen = find(model, version);
  if (!gen.status.ok()) return gen.status;
  if (unloaded_.load()) {
    return {Code::kUnavailable, "model \"" + model + "\" is unloaded; POST /v2/repository/models/" + model +
                                    "/load loads it again"};
  }
  if (!gen.value->executor().stats().all_ready) return {Code::kUnavailable, "model \"" + model + "\": workers starting"};
  return {};
}

std::string ServeService::server_metadata_json() {
  std::vector<std::string> extensions = {"binary_tensor_data", "model_configuration", "statistics", "model_repository"};
  if (shm_->allowed()) extensions.push_back("system_shared_memory");
  return oip::server_metadata(COREPOOL_VERSION, extensions);
}

triton::Result<std::string> ServeService::model_metadata_json(const std::string& model, const std::string& version) {
  auto gen = find(model, version);
  if (!gen.status.ok()) return {gen.status};
  return {{}, oip::model_metadata(gen.value->model().config)};
}

triton::Result<std::string> ServeService::model_config_json(const std::string& model, const std::string& version) {
  auto gen = find(model, version);
  if (!gen.status.ok()) return {gen.status};
  Generation& g = *gen.value;
  triton::ServingFacts facts;
  facts.max_batch = std::min<int64_t>(g.model().config.max_batch, static_cast<int64_t>(g.executor().stats().depth));
  facts.workers = g.executor().workers();
  facts.engine_batch = g.plan().max_batch;
  facts.max_queue_delay_us = g.config().mode == "process" ? g.config().max_batch_delay_us : 0;
  facts.mode = g.config().mode;
  facts.optimize = g.plan().optimize.applied;
  return {{}, triton::model_config_json(g.model().config, facts)};
}

triton::Result<std::string> ServeService::statistics_json(const std::string& model, const std::string& version) {
  std::shared_ptr<Generation> gen = host_.current();
  if (!model.empty()) {
    auto found = find(model, version);
    if (!found.status.ok()) return {found.status};
    gen = found.value;
  }
  return {{}, "{\"model_stats\":[" + counters_->stats.to_json(gen->model().config.name, oip::kModelVersion) + "]}"};
}

std::string ServeService::repository_index_json(bool ready_only) {
  std::shared_ptr<Generation> gen = host_.current();
  const std::string& name = gen->model().config.name;
  const Status ready = model_ready(name, "");
  if (ready_only && !ready.ok()) return "[]";
  return "[" + triton::repository_entry_json(name, oip::kModelVersion, ready.ok(), ready.message) + "]";
}

void ServeService::load(const std::string& model, const std::string& config_json, std::function<void(Status)> done) {
  auto gen = find(model, "");
  if (!gen.status.ok()) return done(gen.status);
  std::string toml;
  if (!config_json.empty()) {
    auto parsed = engine_toml_of(config_json);
    if (!parsed.status.ok()) return done(parsed.status);
    toml = std::move(parsed.value);
    // Checked against the running config here, so that a bad key is a 400 at
    // once; the main thread applies it again over the reloaded file.
    Config check = gen.value->config();
    try {
      override_engine_keys(check, "parameters.config", toml);
    } catch (const ConfigError& e) {
      return done({Code::kInvalidArgument, e.what()});
    }
  }
  host_.request_reload(std::move(toml), std::move(done));  // the host calls loaded() once the new generation serves
}

Status ServeService::unload(const std::string& model) {
  auto gen = find(model, "");
  if (!gen.status.ok()) return gen.status;
  unloaded_.store(true);
  return {};
}

Status ServeService::shm_register(const std::string& name, const std::string& key, uint64_t offset,
                                  uint64_t byte_size) {
  return shm_->register_region(name, key, offset, byte_size);
}

Status ServeService::shm_unregister(const std::string& name) {
  if (!shm_->allowed()) return {Code::kPermissionDenied, "client shared memory is not enabled: set serve.allow_client_shm = true"};
  return shm_->unregister(name);
}

triton::Result<std::string> ServeService::shm_status_json(const std::string& name) {
  if (!shm_->allowed()) {
    return {{Code::kPermissionDenied, "client shared memory is not enabled: set serve.allow_client_shm = true"}};
  }
  return shm_->status_json(name);
}

Status ServeService::read_shm_input(triton::InferInput& input, const ModelConfig& config, int64_t max_batch) const {
  if (!input.input_header) return {Code::kInvalidArgument, "inputs[0]: a shared-memory input needs its name, datatype and shape"};
  auto read = triton::read_shm_input(*shm_, *input.input_header, *input.input_shm, config, max_batch,
                                     std::move(input.tensor.id));
  if (!read.status.ok()) return read.status;
  input.tensor = std::move(read.value);
  return {};
}

triton::Result<triton::Service::ModelView> ServeService::model_view(const std::string& model,
                                                                    const std::string& version) {
  auto gen = find(model, version);
  if (!gen.status.ok()) return {gen.status};
  ModelView view;
  view.config = gen.value->model().config;
  view.max_batch = std::min<int64_t>(view.config.max_batch, static_cast<int64_t>(gen.value->executor().stats().depth));
  return {{}, std::move(view)};
}

std::shared_ptr<triton::InferCall> ServeService::infer(triton::InferInput&& input, triton::InferDone done) {
  auto answered = [&](Status status) {
    if (status.code != Code::kNotFound) counters_->stats.record_failure(0);
    done(std::move(status), {});
    return std::make_shared<AnsweredCall>();
  };
  auto gen = find(input.model, input.version);
  if (!gen.status.ok()) return answered(gen.status);
  if (unloaded_.load()) return answered(model_ready(input.model, input.version));
  const ModelConfig& config = gen.value->model().config;
  if (config.is_stateful()) return answered({Code::kInvalidArgument, stateful_refusal(config.name)});
  if (input.input_shm) {
    const int64_t max_batch =
        std::min<int64_t>(config.max_batch, static_cast<int64_t>(gen.value->executor().stats().depth));
    if (Status read = read_shm_input(input, config, max_batch); !read.ok()) return answered(read);
  }
  if (Status items = check_items(*gen.value, input.tensor.items); !items.ok()) return answered(items);
  const Deadline deadline = deadline_of(*gen.value, input.deadline);
  if (!deadline.status.ok()) return answered(deadline.status);
  triton::InferOutput header;
  header.model = config.name;
  header.version = oip::kModelVersion;
  header.id = input.tensor.id;
  header.labels = static_cast<int64_t>(config.labels.size());
  header.batch = static_cast<int64_t>(input.tensor.items.size());
  if (input.output_shm) {
    // The region is held from here, so an unregister while the request is
    // queued does not lose its answer; the scores go there, not in the reply.
    auto out = triton::prepare_shm_output(*shm_, *input.output_shm, header.batch, config);
    if (!out.status.ok()) return answered(out.status);
    done = [out = std::move(out.value), done = std::move(done)](Status status, triton::InferOutput&& result) {
      if (status.ok()) {
        if (Status written = triton::write_shm_output(out, result.scores); !written.ok()) return done(written, {});
        result.scores.clear();
        result.output_shm = out.ref;
      }
      done(std::move(status), std::move(result));
    };
  }
  auto call = std::make_shared<ServeInferCall>(gen.value, std::move(header), input.tensor.items.size(),
                                               std::move(done), counters_, deadlines_);
  call->start(std::move(input.tensor.items), deadline.at, deadline.source);
  return call;
}

void ServeService::observe(const std::string& protocol, const std::string& endpoint, int code, double seconds) {
  metrics_.observe(protocol, endpoint, code, seconds);
}

}  // namespace corepool
