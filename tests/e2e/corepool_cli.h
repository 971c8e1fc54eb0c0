// Runs the real corepool binary with a command line, warnings only on stderr,
// in the test's temp dir: the e2e tests' one way to call the CLI.
#pragma once

#include <string>
#include <vector>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace corepool::testing {

inline ProcessResult corepool_cli(std::vector<std::string> args, const TempDir& dir) {
  args.insert(args.begin(), {COREPOOL_BIN, "--log-level", "warn"});
  return run_process(args, dir.path());
}

}  // namespace corepool::testing
