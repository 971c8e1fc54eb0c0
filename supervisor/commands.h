// The glue between the parsed command line and the rooms: the effective
// config (file, then flags), `version`, and the commands whose flags need
// translating into their room's options (batch, merge, serve). Called by
// main() only, in the order its startup script gives.
#pragma once

#include <optional>

#include "config/config.h"
#include "supervisor/cli.h"
#include "worker/exit_codes.h"

namespace corepool {

// The config file (or the defaults) under the command line's flags, the
// bundled model's directory resolved; the mode keys checked for batch and
// serve. Prints "corepool: config error: ..." and returns nullopt when unusable.
std::optional<Config> load_effective_config(const Cli& cli);

// `corepool version`: corepool's and LibTorch's versions on stdout.
ExitCode print_version();

// `corepool merge`. Reads only: runs before the allocator re-exec and logging.
ExitCode run_merge_command(const Config& config, const Cli& cli);

// `corepool eval`: reads two directories only, like merge; no model.
ExitCode run_eval_command(const Cli& cli);

// batch, serve, bench or tune, once logging and the runtime threads are set
// up. The error that ends one becomes its exit code: an unusable manifest
// kUsage, a model error kModelError, anything else kInternal.
ExitCode run_engine_command(const Config& config, const Cli& cli);

}  // namespace corepool
