// The allocator switch as seen from inside a process: the unit-test binary is
// not linked with jemalloc, and the systemd unit states corepool's default
// MALLOC_CONF (so the two cannot drift apart). The re-exec itself is tested
// end to end through the corepool binary (BenchCliTest.EveryPointRunsOnTheAllocatorItNames).
#include "supervisor/pool/allocator.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace corepool {
namespace {

TEST(AllocatorTest, ThisTestBinaryRunsOnTheSystemAllocatorUnlessPreloaded) {
  const bool preloaded = std::getenv("LD_PRELOAD") && std::string(std::getenv("LD_PRELOAD")).find("jemalloc") !=
                                                          std::string::npos;
  EXPECT_EQ(allocator_in_use(), preloaded ? "jemalloc" : "system");
}

TEST(AllocatorTest, SystemdUnitStatesTheDefaultMallocConfPlusAbortConf) {
  const auto unit = std::filesystem::path(__FILE__).parent_path() / "../../systemd/corepool.service.in";
  std::ifstream in(unit);
  ASSERT_TRUE(in) << unit;
  std::stringstream text;
  text << in.rdbuf();
  const std::string line = std::string("\nEnvironment=MALLOC_CONF=") + kDefaultMallocConf + ",abort_conf:true\n";
  EXPECT_NE(text.str().find(line), std::string::npos) << "expected" << line << "in " << unit;
}

TEST(AllocatorTest, AlreadyOnTheWantedAllocatorNothingHappens) {
  // No re-exec (which would replace this test process): the wanted one runs.
  EXPECT_EQ(ensure_allocator(allocator_in_use(), nullptr), "");
}

}  // namespace
}  // namespace corepool
