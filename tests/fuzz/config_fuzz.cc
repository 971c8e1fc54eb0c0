// libFuzzer target: corepool.toml text into load_config (config/config.cc).
// Any input must either load or throw ConfigError; any other exception, a
// crash, a leak or undefined behaviour is a finding. A config that loads must
// hold values inside the documented ranges that later code relies on.
#include <cstddef>
#include <cstdint>

#include "config/config.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static corepool::fuzz::InputFile file;
  const std::string path = file.write(data, size);
  corepool::Config config;
  try {
    config = corepool::load_config(path);
  } catch (const corepool::ConfigError&) {
    return 0;  // the expected answer to bad input
  }
  if (config.max_body_mb < 1 || config.max_connections < 1 || config.header_timeout_s < 1) {
    corepool::fuzz::fail("load_config accepted an out-of-range serve limit");
  }
  if (!config.listen.empty()) {
    try {
      (void)corepool::parse_host_port(config.listen, "serve.listen");
    } catch (const corepool::ConfigError&) {
      corepool::fuzz::fail("load_config accepted serve.listen that parse_host_port refuses");
    }
  }
  return 0;
}
