// load_config(): the service/batch TOML file (documented in config/corepool.toml)
// read over the defaults in config.h. Called once by supervisor/main.cc before CLI
// overrides; all checking lives in TomlReader, the keys and their ranges in
// config_keys.cc's table: this file only walks it.
#include "config/config.h"

#include "config/config_keys.h"
#include "config/toml_reader.h"

namespace corepool {
namespace {

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

// One row's value from the file over the one in `config`, with its checks.
void read_key(TomlReader& reader, const ConfigKey& key, Config& config) {
  switch (key.type) {
    case KeyType::kInt:
      config.*key.number = reader.get_int(key.name, config.*key.number, key.min, key.max);
      return;
    case KeyType::kBool:
      config.*key.boolean = reader.get_bool(key.name, config.*key.boolean);
      return;
    case KeyType::kString:
      config.*key.text = reader.get_string(key.name, config.*key.text, key.choices);
      return;
    case KeyType::kPath:  // left empty it would silently mean "the current directory"
      config.*key.text = reader.get_string(key.name, config.*key.text);
      if ((config.*key.text).empty()) reader.fail(key.name, "must not be empty");
      return;
    case KeyType::kHostPort: {
      config.*key.text = reader.get_string(key.name, config.*key.text);
      HostPort unused;
      if ((config.*key.text).empty()) return;
      if (std::string problem = host_port_problem(config.*key.text, unused); !problem.empty()) {
        reader.fail(key.name, problem);
      }
      return;
    }
  }
}

bool is_engine_key(const ConfigKey& key) { return key_section(key) == "engine"; }

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
  for (const ConfigKey& key : config_keys()) {
    if (is_engine_key(key)) read_key(reader, key, config);
  }
  reader.check_no_unknown_keys();
  // A client asking for a new value now is told it cannot have it, rather than warned.
  for (const ConfigKey& key : config_keys()) {
    if (is_engine_key(key) && key.reload != Reload::kYes && !same_value(key, config, before)) {
      reader.fail(key.name, "cannot change on reload (it belongs to the process): restart the service");
    }
  }
  check_mode_keys(config);
}

void set_from_flag(const ConfigKey& key, const std::string& text, Config& config) {
  switch (key.type) {
    case KeyType::kInt: config.*key.number = std::stoi(text); return;
    case KeyType::kBool: config.*key.boolean = text == "true"; return;
    case KeyType::kHostPort:
      if (!text.empty()) parse_host_port(text, key.flag);  // throws ConfigError naming the flag
      config.*key.text = text;
      return;
    case KeyType::kString:
    case KeyType::kPath:
      if (!text.empty()) config.*key.text = text;
      return;
  }
}

Config load_config(const std::string& path) {
  TomlReader reader(path);
  Config config;
  for (const ConfigKey& key : config_keys()) read_key(reader, key, config);
  config.sources = read_sources(reader);
  reader.check_no_unknown_keys();
  return config;
}

}  // namespace corepool
