// The references printed from config_keys.cc's table: docs/configuration.md
// (committed, checked equal by tests/unit/config_reference_test.cc) and
// corepool.toml(5) (roff, generated at build time). Called by
// tools/corepool-config-doc and the test; plain functions over the table.
#pragma once

#include <string>

namespace corepool {

// docs/configuration.md: one table per section, [model] [engine] [batch] [serve] [log].
std::string config_reference_markdown();

// corepool.toml(5) in man(7) macros; `version` goes in the footer ("corepool 0.9.0").
std::string config_reference_roff(const std::string& version);

}  // namespace corepool
