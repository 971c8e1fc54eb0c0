// The one table of corepool.toml's keys: name, type, range, what a reload does,
// its command-line flag and one line of doc, each row pointing at its Config
// member (whose initializer is the default). load_config(), the flags
// (supervisor/cli.cc), the reload check, docs/configuration.md and
// corepool.toml(5) all read it; adding a key is one row plus its use.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace corepool {

enum class KeyType {
  kString,    // any string, or one of `choices`
  kPath,      // a string that must not be empty (it would mean ".")
  kHostPort,  // "host:port" / "[v6]:port", or "" for none
  kInt,       // an integer in [min, max]
  kBool,
};

// What a reload (SIGHUP, or a repository load's parameters.config) does with a changed value.
enum class Reload {
  kYes,      // the next generation uses it
  kRestart,  // SIGHUP: logged as a WARN, used from the next restart; parameters.config: refused
  kRefused,  // the reload fails, the running generation keeps serving
};

// The commands whose --help lists a key's flag (a bitmask).
enum FlagOn : unsigned {
  kFlagNowhere = 0,
  kFlagGlobal = 1u << 0,  // before the subcommand: `corepool --log-level warn serve`
  kFlagBatch = 1u << 1,
  kFlagMerge = 1u << 2,
  kFlagServe = 1u << 3,
  kFlagBench = 1u << 4,
  kFlagTune = 1u << 5,
  kFlagDoctor = 1u << 6,
};

struct ConfigKey {
  const char* name;  // dotted: "engine.workers" is `workers` in [engine]
  KeyType type;
  std::string Config::*text;  // kString, kPath, kHostPort (else nullptr)
  int Config::*number;        // kInt
  bool Config::*boolean;      // kBool
  int min, max;               // kInt
  std::vector<std::string> choices;  // kString: empty = any
  Reload reload;
  const char* flag;       // "--workers", or nullptr
  unsigned flag_on;       // FlagOn bits
  const char* flag_help;  // the flag's --help text
  const char* doc;        // one line for the references
  bool secret = false;    // a credential: plain_value() prints "(set)" or "", never the value
};

// Every key, in the order load_config() reads them (its first error wins).
const std::vector<ConfigKey>& config_keys();
// nullptr when no row is named `name`.
const ConfigKey* find_config_key(const std::string& name);

// "engine" of "engine.workers"; "workers" of it.
std::string key_section(const ConfigKey& key);
std::string key_leaf(const ConfigKey& key);
// The value in `config` as TOML writes it: "\"thread\"", "0", "true".
std::string toml_value(const ConfigKey& key, const Config& config);
// The value unquoted, for log lines: thread, 0, true.
std::string plain_value(const ConfigKey& key, const Config& config);
bool same_value(const ConfigKey& key, const Config& a, const Config& b);
// What the key accepts, for the references: "0..1024", "\"thread\", \"process\"".
std::string allowed_text(const ConfigKey& key);
const char* type_name(KeyType type);
const char* reload_name(Reload reload);

// The key set from its flag's text (config.cc); CLI11 has checked the range or
// the choices. An empty text means "not given", except for an address, where ""
// means none; an address is checked, the flag named (--listen: "x" is not
// host:port). Throws ConfigError.
void set_from_flag(const ConfigKey& key, const std::string& text, Config& config);

}  // namespace corepool
