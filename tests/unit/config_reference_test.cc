// The table of config keys (config/config_keys.cc) against everything that
// names them: each row reads its own Config member from a file, the shipped
// config/corepool.toml and docs/configuration.md hold exactly its keys, and
// docs/configuration.md is the generator's output (tools/corepool-config-doc).
#include "config/config_doc.h"
#include "config/config_keys.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace corepool {
namespace {

namespace fs = std::filesystem;

// The source tree from this file's path, as config_test.cc finds it: absolute,
// or (ccache's base_dir) relative to the build's tests/ directory, where ctest runs.
const fs::path kSourceDir = fs::path(__FILE__).parent_path() / "../..";

std::string read_file(const fs::path& path) {
  EXPECT_TRUE(fs::exists(path)) << path << " not found (run from the build's tests/ directory, as ctest does)";
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::set<std::string> table_keys() {
  std::set<std::string> keys;
  for (const ConfigKey& key : config_keys()) keys.insert(key.name);
  return keys;
}

// "missing: a, b; extra: c" naming what `found` lacks or adds against the table.
std::string difference(const std::set<std::string>& found) {
  std::string missing, extra;
  for (const std::string& key : table_keys()) {
    if (!found.count(key)) missing += " " + key;
  }
  for (const std::string& key : found) {
    if (!table_keys().count(key)) extra += " " + key;
  }
  return "missing:" + missing + "; extra:" + extra;
}

void collect_keys(const toml::table& table, const std::string& prefix, std::set<std::string>& out) {
  for (auto&& [name, node] : table) {
    const std::string path = prefix.empty() ? std::string(name.str()) : prefix + "." + std::string(name.str());
    if (const toml::table* sub = node.as_table()) {
      collect_keys(*sub, path, out);
    } else {
      out.insert(path);
    }
  }
}

// The keys of docs/configuration.md: "| `leaf` |" rows under "## [section]".
std::set<std::string> markdown_keys(const std::string& text) {
  std::set<std::string> keys;
  std::istringstream lines(text);
  std::string line, section;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_match(line, m, std::regex(R"(## \[([a-z_]+)\])"))) section = m[1];
    if (std::regex_search(line, m, std::regex(R"(^\| `([a-z_]+)` \|)"))) keys.insert(section + "." + std::string(m[1]));
  }
  return keys;
}

// A value other than the default that the key accepts, as TOML.
std::string other_value(const ConfigKey& key, const Config& defaults) {
  switch (key.type) {
    case KeyType::kInt: return std::to_string(defaults.*key.number == key.max ? key.min : key.max);
    case KeyType::kBool: return defaults.*key.boolean ? "false" : "true";
    case KeyType::kPath: return "\"/srv/x\"";
    case KeyType::kHostPort: return "\"127.0.0.1:9\"";
    case KeyType::kString: break;
  }
  for (const std::string& choice : key.choices) {
    if (choice != defaults.*key.text) return "\"" + choice + "\"";
  }
  return "\"x\"";
}

TEST(ConfigReferenceTest, EachRowReadsItsOwnMemberAndNoOther) {
  testing::TempDir temp{"corepool-config-ref"};
  const Config defaults;
  for (const ConfigKey& key : config_keys()) {
    const std::string path = temp.path() + "/c.toml";
    std::ofstream(path) << "[" << key_section(key) << "]\n" << key_leaf(key) << " = " << other_value(key, defaults)
                        << "\n";
    const Config read = load_config(path);
    for (const ConfigKey& other : config_keys()) {
      EXPECT_EQ(same_value(other, read, defaults), &other != &key) << key.name << " set " << other.name;
    }
  }
}

TEST(ConfigReferenceTest, EveryDefaultIsAllowedByItsOwnRow) {
  const Config defaults;
  for (const ConfigKey& key : config_keys()) {
    if (key.type == KeyType::kInt) {
      EXPECT_GE(defaults.*key.number, key.min) << key.name;
      EXPECT_LE(defaults.*key.number, key.max) << key.name;
    }
    if (!key.choices.empty()) {
      EXPECT_NE(std::find(key.choices.begin(), key.choices.end(), defaults.*key.text), key.choices.end()) << key.name;
    }
    EXPECT_EQ(key.flag != nullptr, key.flag_on != kFlagNowhere) << key.name;
    EXPECT_EQ(key.flag != nullptr, key.flag_help != nullptr) << key.name;
  }
}

TEST(ConfigReferenceTest, NamesAndFlagsAreUnique) {
  std::set<std::string> flags;
  for (const ConfigKey& key : config_keys()) {
    if (key.flag) {
      EXPECT_TRUE(flags.insert(key.flag).second) << key.flag;
    }
  }
  EXPECT_EQ(table_keys().size(), config_keys().size());
}

TEST(ConfigReferenceTest, OnlyTheModeRefusesAReloadAndTheProcesssSettingsWarn) {
  std::set<std::string> refused, restart;
  for (const ConfigKey& key : config_keys()) {
    if (key.reload == Reload::kRefused) refused.insert(key.name);
    if (key.reload == Reload::kRestart) restart.insert(key.name);
  }
  EXPECT_EQ(refused, std::set<std::string>{"engine.mode"});
  EXPECT_EQ(restart, (std::set<std::string>{
                         "engine.intra_op_threads", "engine.inter_op_threads", "engine.allocator", "serve.listen",
                         "serve.unix_socket", "serve.unix_socket_group", "serve.max_body_mb", "serve.max_connections",
                         "serve.idle_timeout_s", "serve.header_timeout_s", "serve.body_timeout_s",
                         "serve.max_audio_requests", "serve.audio_threads", "serve.retry_after_s",
                         "serve.grpc_listen", "serve.grpc_max_message_mb", "serve.allow_client_shm",
                         "serve.client_shm_group", "serve.api_token", "serve.api_token_file",
                         "serve.allow_model_control", "serve.max_streams", "serve.stream_idle_s",
                         "serve.grpc_stream_backlog"}));
}

TEST(ConfigReferenceTest, ParametersConfigRefusesEveryEngineKeyThatIsNotReloadable) {
  for (const ConfigKey& key : config_keys()) {
    if (key_section(key) != "engine" || key.reload == Reload::kYes) continue;
    Config config;
    const std::string toml = "[engine]\n" + key_leaf(key) + " = " + other_value(key, config) + "\n";
    try {
      override_engine_keys(config, "parameters.config", toml);
      ADD_FAILURE() << key.name << " changed by parameters.config";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), std::string("parameters.config:2: ") + key.name +
                                           ": cannot change on reload (it belongs to the process): restart the service");
    }
  }
}

TEST(ConfigReferenceTest, FlagsSetTheirKeyAndAnEmptyAddressMeansNone) {
  Config config;
  set_from_flag(*find_config_key("engine.workers"), "7", config);
  set_from_flag(*find_config_key("batch.force"), "true", config);
  set_from_flag(*find_config_key("model.dir"), "", config);  // "" = not given
  set_from_flag(*find_config_key("serve.grpc_listen"), "", config);
  EXPECT_EQ(config.workers, 7);
  EXPECT_TRUE(config.force);
  EXPECT_EQ(config.model_dir, Config{}.model_dir);
  EXPECT_EQ(config.grpc_listen, "");
  try {
    set_from_flag(*find_config_key("serve.listen"), "localhost", config);
    ADD_FAILURE() << "--listen localhost accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "--listen: \"localhost\" is not host:port (no port)");
  }
}

TEST(ConfigReferenceTest, ShippedTomlSetsExactlyTheTablesKeys) {
  std::set<std::string> keys;
  const toml::table shipped = toml::parse(read_file(kSourceDir / "config/corepool.toml"));
  collect_keys(shipped, "", keys);
  EXPECT_EQ(keys, table_keys()) << "config/corepool.toml against config/config_keys.cc: " << difference(keys);
}

TEST(ConfigReferenceTest, DocsListExactlyTheTablesKeys) {
  const std::set<std::string> keys = markdown_keys(read_file(kSourceDir / "docs/configuration.md"));
  EXPECT_EQ(keys, table_keys()) << "docs/configuration.md against config/config_keys.cc: " << difference(keys);
}

// The first line where `a` and `b` differ, numbered, with both versions.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream in_a(a), in_b(b);
  std::string line_a, line_b;
  for (int n = 1;; ++n) {
    const bool more_a = static_cast<bool>(std::getline(in_a, line_a));
    const bool more_b = static_cast<bool>(std::getline(in_b, line_b));
    if (!more_a && !more_b) return "";
    if (!more_a || !more_b || line_a != line_b) {
      return "line " + std::to_string(n) + ":\n  file:      " + (more_a ? line_a : "(end)") +
             "\n  generated: " + (more_b ? line_b : "(end)");
    }
  }
}

TEST(ConfigReferenceTest, DocsAreTheGeneratorsOutput) {
  const std::string difference = first_difference(read_file(kSourceDir / "docs/configuration.md"),
                                                  config_reference_markdown());
  EXPECT_EQ(difference, "")
      << "docs/configuration.md is stale: build/tools/corepool-config-doc --markdown > docs/configuration.md";
}

}  // namespace
}  // namespace corepool
