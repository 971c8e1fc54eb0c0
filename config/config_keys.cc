// The rows of config_keys.h's table and the text helpers the references use.
// A row's default is its Config member's initializer (config.h); its doc line
// is what docs/configuration.md and corepool.toml(5) print. Read-only after
// the first call, so any thread may read it.
#include "config/config_keys.h"

#include "config/toml_reader.h"

namespace corepool {
namespace {

struct Flag {
  const char* name = nullptr;
  unsigned on = kFlagNowhere;
  const char* help = nullptr;
};

// The engine flags every engine command takes (tune takes a list for --optimize: bench/tune.h).
constexpr unsigned kEngineCommands = kFlagBatch | kFlagServe | kFlagBench | kFlagTune | kFlagDoctor;

ConfigKey text(const char* name, KeyType type, std::string Config::*field, std::vector<std::string> choices,
               Reload reload, Flag flag, const char* doc) {
  return {name, type, field, nullptr, nullptr, 0, 0, std::move(choices), reload, flag.name, flag.on, flag.help, doc};
}

ConfigKey integer(const char* name, int Config::*field, int min, int max, Reload reload, Flag flag,
                  const char* doc) {
  return {name, KeyType::kInt, nullptr, field, nullptr, min, max, {}, reload, flag.name, flag.on, flag.help, doc};
}

ConfigKey boolean(const char* name, bool Config::*field, Reload reload, Flag flag, const char* doc) {
  return {name, KeyType::kBool, nullptr, nullptr, field, 0, 0, {}, reload, flag.name, flag.on, flag.help, doc};
}

ConfigKey secret(ConfigKey key) {
  key.secret = true;
  return key;
}

std::vector<ConfigKey> make_keys() {
  using R = Reload;
  using T = KeyType;
  const Flag none;
  return {
      text("model.dir", T::kPath, &Config::model_dir, {}, R::kYes,
           {"--model", kEngineCommands, "model directory (model.pt + model.toml)"},
           "directory holding model.pt (TorchScript) and model.toml (its input, features and labels)"),
      text("engine.mode", T::kString, &Config::mode, {"thread", "process"}, R::kRefused,
           {"--mode", kFlagBatch | kFlagServe | kFlagTune | kFlagDoctor, "thread | process"},
           "thread: one process, an inference thread per worker; process: a forked worker process per worker"),
      integer("engine.workers", &Config::workers, 0, 1024, R::kYes,
              {"--workers", kEngineCommands, "engine threads / workers; 0 = usable cpus"},
              "engine threads or worker processes; 0 = one per usable CPU (affinity mask, cgroup quota)"),
      integer("engine.intra_op_threads", &Config::intra_op_threads, 0, 1024, R::kRestart,
              {"--intra-op-threads", kEngineCommands, "LibTorch intra-op threads (1 = pool off, 0 = LibTorch default)"},
              "threads LibTorch may use inside one operator; keep 1 with one worker per core; 0 = LibTorch's default"),
      integer("engine.inter_op_threads", &Config::inter_op_threads, 0, 1024, R::kRestart,
              {"--inter-op-threads", kEngineCommands, "LibTorch inter-op threads (0 = LibTorch default)"},
              "threads LibTorch may use to run independent operators in parallel; 0 = LibTorch's default"),
      integer("engine.max_batch", &Config::max_batch, 0, 1024, R::kYes,
              {"--max-batch", kEngineCommands, "segments per forward(); 0 = measured at start (default)"},
              "audio segments per forward() call; 0 = measured at start (the lowest cost per segment); "
              "process mode: at most 256, fewer for an input over 32 KB (130 for 1 s of 16 kHz; a worker's 8 MB slab)"),
      text("engine.optimize", T::kString, &Config::optimize, {"none", "onednn", "onednn-direct", "bf16"}, R::kYes,
           {"--optimize", kEngineCommands & ~kFlagTune,
            "none | onednn (default) | onednn-direct | bf16: how the model is optimized at load"},
           "how the model is prepared at load: oneDNN kernels, LibTorch's passes alone, bfloat16, or as loaded"),
      text("engine.kernels", T::kString, &Config::kernels, {"auto", "onednn", "corepool", "portable", "torch"}, R::kYes,
           {"--kernels", kEngineCommands & ~kFlagTune,
            "auto (default) | onednn | corepool | portable | torch: the kernels of optimize = onednn"},
           "with optimize = \"onednn\", whose kernels run the rewritten convolutions and linear layers: auto (this "
           "CPU's choice), onednn (oneDNN's Winograd, AVX-512), corepool (corepool's AVX2 Winograd and packed GEMM), "
           "portable (corepool's Winograd without AVX2), torch (none: LibTorch's own)"),
      text("engine.plan_cache", T::kString, &Config::plan_cache, {}, R::kYes,
           {"--plan-cache", kFlagBatch | kFlagServe, "plan cache directory; \"off\" = measure at every start"},
           "where the measured plan (Winograd items per call, the batch calibration) is kept for the next start of "
           "the same model on the same CPU and libraries: \"\" = $CACHE_DIRECTORY, else $XDG_CACHE_HOME/corepool, "
           "else ~/.cache/corepool; \"off\" = measure at every start"),
      boolean("engine.replan", &Config::replan, R::kYes,
              {"--replan", kFlagBatch | kFlagServe, "measure the plan anew and replace the cached one"},
              "measure the plan anew at start and replace the cached one (engine.plan_cache)"),
      integer("engine.queue_depth", &Config::queue_depth, 0, 1000000, R::kYes, none,
              "segments in flight between decoding and inference (bounds memory); 0 = 4 * workers * max_batch"),
      boolean("engine.pin_threads", &Config::pin_threads, R::kYes, none,
              "pin engine thread / worker i to the i-th usable CPU (only when intra_op_threads is 1)"),
      integer("engine.max_batch_delay_us", &Config::max_batch_delay_us, 0, 1000000, R::kYes, none,
              "process mode: wait this long for a fuller batch when a worker's queue runs dry; 0 = never"),
      integer("engine.hang_timeout_ms", &Config::hang_timeout_ms, 100, 3600000, R::kYes, none,
              "process mode: a worker whose heartbeat is older than this is killed and replaced"),
      integer("engine.max_requests", &Config::max_requests, 0, 1000000000, R::kYes, none,
              "process mode: recycle a worker after this many segments; 0 = never (thread mode refuses non-zero)"),
      integer("engine.max_rss_mb", &Config::max_rss_mb, 0, 16777216, R::kYes, none,
              "process mode: recycle a worker whose VmRSS exceeds this many MiB; 0 = never (thread mode refuses "
              "non-zero)"),
      text("engine.allocator", T::kString, &Config::allocator, {"jemalloc", "system"}, R::kRestart,
           {"--allocator", kFlagGlobal, "jemalloc | system (glibc); default engine.allocator"},
           "malloc of the service and its workers: jemalloc (preloaded by a re-exec) or system (glibc)"),
      text("batch.out_dir", T::kPath, &Config::out_dir, {}, R::kYes,
           {"--out", kFlagBatch | kFlagMerge, "output directory, or - for stdout"},
           "where `corepool batch` writes one .jsonl result file per input"),
      boolean("batch.force", &Config::force, R::kYes,
              {"--force", kFlagBatch, "redo inputs whose result is already complete"},
              "redo inputs whose result file is already complete (default: skip them)"),
      text("serve.listen", T::kHostPort, &Config::listen, {}, R::kRestart,
           {"--listen", kFlagServe, "TCP host:port ([v6]:port), \"\" for none; default serve.listen"},
           "HTTP on this TCP host:port ([v6]:port; port 0 = any free one); \"\" = no TCP listener"),
      text("serve.unix_socket", T::kString, &Config::unix_socket, {}, R::kRestart,
           {"--unix", kFlagServe, "also listen on this Unix socket path (mode 0660)"},
           "HTTP on this Unix socket path too (mode 0660, removed at exit); \"\" = none"),
      text("serve.unix_socket_group", T::kString, &Config::unix_socket_group, {}, R::kRestart, none,
           "group owning the Unix socket, so that its members may connect; \"\" = the service's own"),
      integer("serve.max_body_mb", &Config::max_body_mb, 1, 4096, R::kRestart, none,
              "a request body over this many MiB is answered 413"),
      integer("serve.max_connections", &Config::max_connections, 1, 1000000, R::kRestart, none,
              "open connections; one more is answered 503 and closed"),
      integer("serve.idle_timeout_s", &Config::idle_timeout_s, 1, 86400, R::kRestart, none,
              "a keep-alive connection idle this many seconds is closed"),
      integer("serve.header_timeout_s", &Config::header_timeout_s, 1, 3600, R::kRestart, none,
              "a request's headers must arrive within this many seconds (else 408)"),
      integer("serve.body_timeout_s", &Config::body_timeout_s, 1, 3600, R::kRestart, none,
              "a request's body must arrive within this many seconds after its headers (else 408)"),
      integer("serve.drain_timeout_s", &Config::drain_timeout_s, 0, 3600, R::kYes, none,
              "SIGTERM: stop accepting and give in-flight requests this many seconds"),
      integer("serve.max_audio_requests", &Config::max_audio_requests, 1, 100000, R::kRestart, none,
              "/v1/audio:tag requests queued or decoding; one more is answered 503 with Retry-After"),
      integer("serve.audio_threads", &Config::audio_threads, 1, 64, R::kRestart, none,
              "threads decoding audio request bodies"),
      integer("serve.retry_after_s", &Config::retry_after_s, 1, 3600, R::kRestart, none,
              "Retry-After of a 503 answered because a queue is full"),
      integer("serve.request_timeout_s", &Config::request_timeout_s, 0, 86400, R::kYes, none,
              "an infer request unanswered this many seconds is answered 504; 0 = no deadline"),
      text("serve.grpc_listen", T::kHostPort, &Config::grpc_listen, {}, R::kRestart,
           {"--grpc-listen", kFlagServe,
            "gRPC (KServe v2 / Triton) host:port, port 0 for any free one, \"\" for none; default serve.grpc_listen"},
           "gRPC (KServe v2 / Triton's GRPCInferenceService) on this TCP host:port; \"\" = no gRPC"),
      integer("serve.grpc_max_message_mb", &Config::grpc_max_message_mb, 1, 2047, R::kRestart, none,
              "a gRPC message over this many MiB is refused with RESOURCE_EXHAUSTED"),
      boolean("serve.allow_client_shm", &Config::allow_client_shm, R::kRestart, none,
              "Triton's system shared memory extension: clients pass tensors through POSIX shm regions"),
      text("serve.client_shm_group", T::kString, &Config::client_shm_group, {}, R::kRestart, none,
           "with allow_client_shm: regions owned by this group are accepted too; \"\" = our uid only"),
      secret(text("serve.api_token", T::kString, &Config::api_token, {}, R::kRestart, none,
                  "with a token, repository load/unload and shared-memory registration need \"Authorization: "
                  "Bearer TOKEN\" (gRPC: metadata authorization); \"\" = none (prefer api_token_file)")),
      text("serve.api_token_file", T::kString, &Config::api_token_file, {}, R::kRestart, none,
           "the token read from this file (first line; it must not be readable by others), instead of "
           "api_token; \"\" = none"),
      boolean("serve.allow_model_control", &Config::allow_model_control, R::kRestart, none,
              "without a token: open repository load/unload and shared-memory registration to anyone who "
              "reaches the port (otherwise they answer 403)"),
      integer("serve.lame_duck_s", &Config::lame_duck_s, 0, 3600, R::kYes,
              {"--lame-duck-s", kFlagServe, "SIGTERM: readiness 503, still serving this many seconds; default serve.lame_duck_s"},
              "SIGTERM: /v2/health/ready answers 503 at once while every other request is still served this "
              "many seconds, then the listener closes and work drains (drain_timeout_s); 0 = close at once"),
      integer("serve.max_streams", &Config::max_streams, 1, 10000, R::kRestart, none,
              "audio streams open at once, WebSockets (/v2/models/NAME/audio/stream) and gRPC ModelStreamInfer "
              "sequences together; one more is refused (503, or an error_message)"),
      integer("serve.stream_idle_s", &Config::stream_idle_s, 1, 86400, R::kRestart, none,
              "a stream that sends no audio for this many seconds is flushed (its events and summary sent) and "
              "closed"),
      integer("serve.grpc_stream_backlog", &Config::grpc_stream_backlog, 1, 1000000, R::kRestart, none,
              "ModelStreamInfer responses waiting on one call for a client that does not read them (its HTTP/2 "
              "window full); past this many, events are dropped and counted (\"dropped\" in the summary)"),
      text("log.level", T::kString, &Config::log_level, {"trace", "debug", "info", "warn", "error", "off"}, R::kYes,
           {"--log-level", kFlagGlobal, "trace|debug|info|warn|error|off"}, "least severe message logged"),
  };
}

}  // namespace

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = make_keys();
  return keys;
}

const ConfigKey* find_config_key(const std::string& name) {
  for (const ConfigKey& key : config_keys()) {
    if (name == key.name) return &key;
  }
  return nullptr;
}

std::string key_section(const ConfigKey& key) {
  const std::string name = key.name;
  return name.substr(0, name.find('.'));
}

std::string key_leaf(const ConfigKey& key) {
  const std::string name = key.name;
  return name.substr(name.find('.') + 1);
}

std::string plain_value(const ConfigKey& key, const Config& config) {
  // Log lines (a reload's "cannot change" warning) must not carry a credential.
  if (key.secret) return (config.*key.text).empty() ? "" : "(set)";
  switch (key.type) {
    case KeyType::kInt: return std::to_string(config.*key.number);
    case KeyType::kBool: return config.*key.boolean ? "true" : "false";
    default: return config.*key.text;
  }
}

std::string toml_value(const ConfigKey& key, const Config& config) {
  if (key.type == KeyType::kInt || key.type == KeyType::kBool) return plain_value(key, config);
  return toml_quote(config.*key.text);
}

bool same_value(const ConfigKey& key, const Config& a, const Config& b) {
  if (key.secret) return a.*key.text == b.*key.text;
  return plain_value(key, a) == plain_value(key, b);
}

std::string allowed_text(const ConfigKey& key) {
  switch (key.type) {
    case KeyType::kInt: return std::to_string(key.min) + ".." + std::to_string(key.max);
    case KeyType::kBool: return "true, false";
    case KeyType::kPath: return "not empty";
    case KeyType::kHostPort: return "host:port, [v6]:port or \"\"";
    case KeyType::kString: break;
  }
  if (key.choices.empty()) return "any";
  std::string out;
  for (const std::string& choice : key.choices) out += (out.empty() ? "" : ", ") + toml_quote(choice);
  return out;
}

const char* type_name(KeyType type) {
  switch (type) {
    case KeyType::kInt: return "integer";
    case KeyType::kBool: return "boolean";
    case KeyType::kPath: return "path";
    case KeyType::kHostPort: return "address";
    case KeyType::kString: return "string";
  }
  return "?";
}

const char* reload_name(Reload reload) {
  switch (reload) {
    case Reload::kYes: return "yes";
    case Reload::kRestart: return "warns-until-restart";
    case Reload::kRefused: return "refused";
  }
  return "?";
}

}  // namespace corepool
