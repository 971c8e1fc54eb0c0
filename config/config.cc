// load_config(): the service/batch TOML file (documented in config/corepool.toml)
// read over the defaults in config.h. Called once by supervisor/main.cc before CLI
// overrides; all checking lives in TomlReader, this file only names keys and ranges.
#include "config/config.h"

#include "config/toml_reader.h"

namespace corepool {
namespace {

// A path key left empty would silently mean "the current directory".
std::string get_path(TomlReader& reader, const std::string& key, const std::string& fallback) {
  std::string value = reader.get_string(key, fallback);
  if (value.empty()) reader.fail(key, "must not be empty");
  return value;
}

void read_engine(TomlReader& reader, Config& config) {
  config.mode = reader.get_string("engine.mode", config.mode, {"thread", "process"});
  config.workers = reader.get_int("engine.workers", config.workers, 0, 1024);
  config.intra_op_threads =
      reader.get_int("engine.intra_op_threads", config.intra_op_threads, 0, 1024);
  config.inter_op_threads =
      reader.get_int("engine.inter_op_threads", config.inter_op_threads, 0, 1024);
  config.max_batch = reader.get_int("engine.max_batch", config.max_batch, 0, 1024);
  config.optimize = reader.get_string("engine.optimize", config.optimize, {"none", "onednn", "onednn-direct", "bf16"});
  config.queue_depth = reader.get_int("engine.queue_depth", config.queue_depth, 0, 1000000);
  config.pin_threads = reader.get_bool("engine.pin_threads", config.pin_threads);
  config.max_batch_delay_us =
      reader.get_int("engine.max_batch_delay_us", config.max_batch_delay_us, 0, 1000000);
  config.hang_timeout_ms = reader.get_int("engine.hang_timeout_ms", config.hang_timeout_ms, 100, 3600000);
  config.max_requests = reader.get_int("engine.max_requests", config.max_requests, 0, 1000000000);
  config.max_rss_mb = reader.get_int("engine.max_rss_mb", config.max_rss_mb, 0, 16777216);
  config.allocator = reader.get_string("engine.allocator", config.allocator, {"jemalloc", "system"});
}

// "" when `text` is host:port (filling `out`), else why it is not.
std::string host_port_problem(const std::string& text, HostPort& out) {
  const std::string prefix = "\"" + text + "\" is not host:port (";
  std::string port;
  if (!text.empty() && text.front() == '[') {  // [v6]:port
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return prefix + "write IPv6 as [addr]:port)";
    }
    out.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) return prefix + "no port)";
    out.host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (out.host.find(':') != std::string::npos) return prefix + "write IPv6 as [addr]:port)";
  }
  if (out.host.empty()) return prefix + "no host)";
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
    return prefix + "the port must be a number)";
  }
  out.port = std::stoi(port);
  if (out.port > 65535) return prefix + "the port is over 65535)";
  return "";
}

void read_serve(TomlReader& reader, Config& config) {
  config.listen = reader.get_string("serve.listen", config.listen);
  HostPort unused;
  if (!config.listen.empty()) {
    if (std::string problem = host_port_problem(config.listen, unused); !problem.empty()) {
      reader.fail("serve.listen", problem);
    }
  }
  config.unix_socket = reader.get_string("serve.unix_socket", config.unix_socket);
  config.unix_socket_group = reader.get_string("serve.unix_socket_group", config.unix_socket_group);
  config.max_body_mb = reader.get_int("serve.max_body_mb", config.max_body_mb, 1, 4096);
  config.max_connections = reader.get_int("serve.max_connections", config.max_connections, 1, 1000000);
  config.idle_timeout_s = reader.get_int("serve.idle_timeout_s", config.idle_timeout_s, 1, 86400);
  config.header_timeout_s = reader.get_int("serve.header_timeout_s", config.header_timeout_s, 1, 3600);
  config.body_timeout_s = reader.get_int("serve.body_timeout_s", config.body_timeout_s, 1, 3600);
  config.drain_timeout_s = reader.get_int("serve.drain_timeout_s", config.drain_timeout_s, 0, 3600);
  config.max_audio_requests = reader.get_int("serve.max_audio_requests", config.max_audio_requests, 1, 100000);
  config.audio_threads = reader.get_int("serve.audio_threads", config.audio_threads, 1, 64);
  config.retry_after_s = reader.get_int("serve.retry_after_s", config.retry_after_s, 1, 3600);
  config.request_timeout_s = reader.get_int("serve.request_timeout_s", config.request_timeout_s, 0, 86400);
  config.grpc_listen = reader.get_string("serve.grpc_listen", config.grpc_listen);
  if (!config.grpc_listen.empty()) {
    if (std::string problem = host_port_problem(config.grpc_listen, unused); !problem.empty()) {
      reader.fail("serve.grpc_listen", problem);
    }
  }
  config.grpc_max_message_mb = reader.get_int("serve.grpc_max_message_mb", config.grpc_max_message_mb, 1, 2047);
  config.allow_client_shm = reader.get_bool("serve.allow_client_shm", config.allow_client_shm);
  config.client_shm_group = reader.get_string("serve.client_shm_group", config.client_shm_group);
}

}  // namespace

HostPort parse_host_port(const std::string& text, const std::string& what) {
  HostPort out;
  const std::string problem = host_port_problem(text, out);
  if (!problem.empty()) throw ConfigError(what + ": " + problem);
  return out;
}

void check_mode_keys(const Config& config) {
  if (config.mode == "process") return;
  for (const auto& [key, value] : {std::pair<const char*, int>{"engine.max_requests", config.max_requests},
                                   {"engine.max_rss_mb", config.max_rss_mb}}) {
    if (value != 0) {
      throw ConfigError(std::string(key) + " = " + std::to_string(value) +
                        " needs engine.mode = \"process\": thread mode has no worker process to recycle "
                        "(set it to 0, or use --mode process)");
    }
  }
}

void override_engine_keys(Config& config, const std::string& name, const std::string& toml_text) {
  TomlReader reader(name, toml_text);
  const Config before = config;
  read_engine(reader, config);
  reader.check_no_unknown_keys();
  const std::pair<const char*, bool> fixed[] = {
      {"engine.mode", config.mode != before.mode},
      {"engine.intra_op_threads", config.intra_op_threads != before.intra_op_threads},
      {"engine.inter_op_threads", config.inter_op_threads != before.inter_op_threads},
      {"engine.allocator", config.allocator != before.allocator}};
  for (const auto& [key, changed] : fixed) {
    if (changed) reader.fail(key, "cannot change on reload (it belongs to the process): restart the service");
  }
  check_mode_keys(config);
}

Config load_config(const std::string& path) {
  TomlReader reader(path);
  Config config;
  config.model_dir = get_path(reader, "model.dir", config.model_dir);
  read_engine(reader, config);
  config.out_dir = get_path(reader, "batch.out_dir", config.out_dir);
  config.force = reader.get_bool("batch.force", config.force);
  read_serve(reader, config);
  config.log_level = reader.get_string("log.level", config.log_level,
                                       {"trace", "debug", "info", "warn", "error", "off"});
  reader.check_no_unknown_keys();
  return config;
}

}  // namespace corepool
