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
      reader.get_int("engine.intra_op_threads", config.intra_op_threads, 1, 1024);
  config.inter_op_threads =
      reader.get_int("engine.inter_op_threads", config.inter_op_threads, 1, 1024);
  config.max_batch = reader.get_int("engine.max_batch", config.max_batch, 1, 1024);
  config.queue_depth = reader.get_int("engine.queue_depth", config.queue_depth, 0, 1000000);
  config.pin_threads = reader.get_bool("engine.pin_threads", config.pin_threads);
  config.max_batch_delay_us =
      reader.get_int("engine.max_batch_delay_us", config.max_batch_delay_us, 0, 1000000);
  config.hang_timeout_ms = reader.get_int("engine.hang_timeout_ms", config.hang_timeout_ms, 100, 3600000);
}

}  // namespace

Config load_config(const std::string& path) {
  TomlReader reader(path);
  Config config;
  config.model_dir = get_path(reader, "model.dir", config.model_dir);
  read_engine(reader, config);
  config.out_dir = get_path(reader, "batch.out_dir", config.out_dir);
  config.force = reader.get_bool("batch.force", config.force);
  config.log_level = reader.get_string("log.level", config.log_level,
                                       {"trace", "debug", "info", "warn", "error", "off"});
  reader.check_no_unknown_keys();
  return config;
}

}  // namespace corepool
