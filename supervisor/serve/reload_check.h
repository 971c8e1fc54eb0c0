// What a reload (SIGHUP, a repository load) may change: ServeProcess::reload()
// checks the next config against the running one before it builds anything.
#pragma once

#include "config/config.h"

namespace corepool {

// Throws ConfigError for a change of a key whose reload is refused (engine.mode);
// logs a WARN for each changed key that takes effect only at the next restart
// (listeners, limits, thread counts, the allocator): config_keys.cc's Reload column.
void check_reloadable(const Config& now, const Config& next);

}  // namespace corepool
