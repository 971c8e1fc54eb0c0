// The main() of a bench tool whose body may throw: a bad input (a missing model, a file that is not audio)
// ends with "TOOL: what" on stderr and exit status 1 instead of std::terminate's abort and core dump.
#pragma once

#include <cstdio>
#include <exception>

namespace corepool {

inline int tool_main(const char* name, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace corepool
