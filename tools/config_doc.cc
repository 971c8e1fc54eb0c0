// corepool-config-doc: prints the configuration reference from
// config/config_keys.cc's table, as docs/configuration.md (--markdown) or as
// corepool.toml(5) (--roff, built into build/man by man/CMakeLists.txt).
// LibTorch-free; run at build time, never installed.
#include <cstdio>
#include <cstring>
#include <string>

#include "config/config_doc.h"

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--markdown") == 0) {
    std::fputs(corepool::config_reference_markdown().c_str(), stdout);
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "--roff") == 0) {
    std::fputs(corepool::config_reference_roff("corepool " COREPOOL_VERSION).c_str(), stdout);
    return 0;
  }
  std::fprintf(stderr, "usage: corepool-config-doc --markdown | --roff\n");
  return 2;
}
