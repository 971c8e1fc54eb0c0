// The one error type of config/: a bad corepool.toml or model.toml. Its own
// header so that the TOML reader (below config.h) can throw it without
// including the Config it helps to build.
#pragma once

#include <stdexcept>

namespace corepool {

// A bad config or model.toml: the message names the file, line and key,
// e.g. "corepool.toml:12: engine.workers: must be between 0 and 1024, got -3".
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace corepool
