#include "supervisor/serve/reload_check.h"

#include <spdlog/spdlog.h>

#include "config/config_keys.h"

namespace corepool {

// Settings that belong to the process, not to a generation (config_keys.cc's
// Reload column): a reload cannot change them. The mode is refused outright: a
// process that has run LibTorch ops (thread mode) must not fork workers, and
// the reverse would make every later reload unsafe. The refusal comes before
// any warning, so that a refused reload logs only why it failed.
void check_reloadable(const Config& now, const Config& next) {
  for (const ConfigKey& key : config_keys()) {
    if (key.reload == Reload::kRefused && !same_value(key, now, next)) {
      throw ConfigError(std::string(key.name) + " cannot change on reload (" + plain_value(key, now) + " -> " +
                        plain_value(key, next) + "): restart the service");
    }
  }
  for (const ConfigKey& key : config_keys()) {
    if (key.reload == Reload::kRestart && !same_value(key, now, next)) {
      spdlog::warn("reload: {} changed; it takes effect at the next restart", key.name);
    }
  }
}

}  // namespace corepool
