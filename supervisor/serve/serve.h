// `corepool serve`: the HTTP service. run_serve() is the supervisor's whole
// lifecycle, gunicorn-arbiter style: start the generation (model + executor)
// and the HTTP server, tell systemd READY=1, then wait for signals: SIGHUP
// (or a repository load, Triton's POST .../load) reloads (a new generation
// next to the old, swapped in when ready), SIGTERM or SIGINT drains and exits
// 0. Called by commands.cc after logging is set up; signals arrive through a
// pipe (signal_pipe.h), so threads that libraries started earlier are harmless.
#pragma once

#include <functional>
#include <string>

#include "config/config.h"
#include "worker/exit_codes.h"

namespace corepool {

struct ServeOptions {
  Config config;
  // Re-reads the config file and reapplies the command line, for SIGHUP.
  // Throws ConfigError when the file is bad (the reload then fails, the old
  // generation keeps serving).
  std::function<Config()> reload_config;
};

// Returns kOk after a clean drain, kCannotListen when a listener cannot be
// opened, kModelError when the model cannot be loaded at start. Throws
// std::exception on any other failure; the caller (commands.cc) maps it to its
// exit code.
ExitCode run_serve(const ServeOptions& options);

}  // namespace corepool
