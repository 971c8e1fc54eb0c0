// `corepool serve`: the HTTP service. run_serve() is the supervisor's whole
// lifecycle, gunicorn-arbiter style: start the generation (model + executor)
// and the HTTP server, tell systemd READY=1, then wait for signals: SIGHUP
// (or a repository load, Triton's POST .../load) reloads (a new generation
// next to the old, swapped in when ready), SIGTERM or SIGINT drains and exits 0. Called by main.cc after logging is set up and
// before any other thread exists (it blocks the signals it waits for).
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
// opened. Throws ModelError on a model error at start and std::exception on
// any other failure; the caller (commands.cc) maps them to their exit codes.
ExitCode run_serve(const ServeOptions& options);

}  // namespace corepool
