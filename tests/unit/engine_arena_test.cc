// EngineArena for real: children of this test binary run on jemalloc with
// corepool's MALLOC_CONF and count the page faults of touching a 16 MiB block
// again after freeing it. Outside an engine arena jemalloc hands such a block
// back at once (checked first, so the test fails if that premise changes and
// the arena is no longer needed); inside one the pages are reused until
// purge(). Faults are counted against a first touch of fresh memory, so that
// transparent huge pages (fewer, larger faults) change nothing.
#include "worker/host/engine_arena.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "supervisor/pool/allocator.h"
#include "tests/support/jemalloc.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace corepool {
namespace {

constexpr size_t kBlock = 16u << 20;  // above jemalloc's 8 MiB oversize_threshold

long thread_faults() {
  rusage r{};
  ::getrusage(RUSAGE_THREAD, &r);
  return r.ru_minflt;
}

// Page faults of allocating a block of kBlock, writing every page and freeing it.
long faults_of_one_block() {
  const long before = thread_faults();
  auto* p = static_cast<volatile char*>(std::malloc(kBlock));
  for (size_t i = 0; i < kBlock; i += 4096) p[i] = 1;
  const long faults = thread_faults() - before;
  std::free(const_cast<char*>(p));
  return faults;
}

unsigned thread_arena() {
  const testing::Mallctl mallctl = testing::find_mallctl();
  unsigned index = 0;
  size_t size = sizeof(index);
  if (!mallctl || mallctl("thread.arena", &index, &size, nullptr, 0) != 0) return ~0u;
  return index;
}

testing::ProcessResult run_child(const std::string& test) {
  return testing::run_self_test_on_jemalloc("DISABLED_EngineArenaChild." + test, kDefaultMallocConf,
                                            std::chrono::seconds(60));
}

TEST(EngineArenaTest, OnTheSystemAllocatorItIsInactive) {
  if (testing::find_mallctl()) GTEST_SKIP() << "this process runs jemalloc";
  const EngineArena arena;
  EXPECT_FALSE(arena.active());
  arena.purge();  // nothing to do, and no crash
}

TEST(EngineArenaTest, FreedBlocksAreReusedWithoutFaultsUntilPurged) {
  if (!testing::jemalloc_usable()) GTEST_SKIP() << COREPOOL_JEMALLOC_LIBRARY << " is not installed, or this is a sanitizer build";
  const testing::ProcessResult r = run_child("ReusesUntilPurged");
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
}

TEST(EngineArenaTest, TheThreadGetsItsArenaBackAndTheNextEngineReusesThisOne) {
  if (!testing::jemalloc_usable()) GTEST_SKIP() << COREPOOL_JEMALLOC_LIBRARY << " is not installed, or this is a sanitizer build";
  const testing::ProcessResult r = run_child("RebindsAndReuses");
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
}

TEST(DISABLED_EngineArenaChild, ReusesUntilPurged) {
  const long fresh = faults_of_one_block();
  ASSERT_GE(fresh, 8) << "a fresh 16 MiB block must fault in";
  // The premise: on jemalloc's own arenas the block was handed back on free.
  EXPECT_GE(faults_of_one_block(), fresh / 2) << "jemalloc kept a freed 16 MiB block: is EngineArena still needed?";
  const EngineArena arena;
  ASSERT_TRUE(arena.active());
  faults_of_one_block();  // the arena's first block
  EXPECT_LE(faults_of_one_block(), fresh / 20) << "the engine arena handed a freed block back";
  EXPECT_LE(faults_of_one_block(), fresh / 20);
  arena.purge();
  EXPECT_GE(faults_of_one_block(), fresh / 2) << "purge() kept the pages";
}

TEST(DISABLED_EngineArenaChild, RebindsAndReuses) {
  const unsigned before = thread_arena();
  ASSERT_NE(before, ~0u) << "jemalloc preloaded";
  int first = -1;
  {
    const EngineArena arena;
    ASSERT_TRUE(arena.active());
    first = arena.index();
    EXPECT_EQ(thread_arena(), static_cast<unsigned>(first));
    EXPECT_NE(thread_arena(), before);
  }
  EXPECT_EQ(thread_arena(), before);
  const EngineArena again;
  EXPECT_EQ(again.index(), first) << "a released arena is taken again, not a new one made";
}

}  // namespace
}  // namespace corepool
