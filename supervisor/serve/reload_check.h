// What a reload (SIGHUP, a repository load) may change: ServeProcess::reload()
// checks the next config against the running one before it builds anything.
#pragma once

#include "config/config.h"

namespace corepool {

// Throws ConfigError for a change that needs a restart and refuses the reload
// (engine.mode); logs a WARN for each setting that will only take effect at the
// next restart (listeners, limits, thread counts).
void check_reloadable(const Config& now, const Config& next);

}  // namespace corepool
