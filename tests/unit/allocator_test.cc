// The allocator switch, for real: this test binary (not linked with jemalloc)
// re-runs itself on one DISABLED_ test that calls ensure_allocator, which
// re-executes the process with LD_PRELOAD adjusted. The child then checks the
// switch from outside the code under test: the libraries mapped into it
// (/proc/self/maps) and jemalloc's own mallctl answering. Also: the systemd
// unit states corepool's default MALLOC_CONF (so the two cannot drift apart).
#include "supervisor/pool/allocator.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace corepool {
namespace {

constexpr const char* kChildEnv = "COREPOOL_ALLOCATOR_TEST_CHILD";  // the allocator the child asks for
constexpr const char* kPassEnv = "COREPOOL_ALLOCATOR_TEST_PASS";    // the child's first LD_PRELOAD, set before it asks

// True when a libjemalloc is mapped into this process.
bool jemalloc_mapped() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("libjemalloc") != std::string::npos) return true;
  }
  return false;
}

// jemalloc's version through its own mallctl, "" when no mallctl is resolvable.
std::string jemalloc_version() {
  using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);
  const auto mallctl = reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl"));
  if (!mallctl) return "";
  const char* version = nullptr;
  size_t size = sizeof(version);
  return mallctl("version", &version, &size, nullptr, 0) == 0 && version ? version : "";
}

// Runs DISABLED_AllocatorChild.SwitchesTo asking for `wanted`, with LD_PRELOAD
// set to `preload` (unset when empty); returns what it printed.
testing::ProcessResult run_child(const std::string& wanted, const std::string& preload) {
  testing::TempDir dir;
  std::vector<std::string> env = {std::string(kChildEnv) + "=" + wanted};
  if (!preload.empty()) env.push_back("LD_PRELOAD=" + preload);
  ::unsetenv("LD_PRELOAD");  // ours is not the child's business
  ::unsetenv(kPassEnv);
  const auto child =
      testing::spawn_process(testing::self_test_argv("DISABLED_AllocatorChild.SwitchesTo"), dir.path(), env);
  return testing::wait_process(child, std::chrono::seconds(60));
}

// Sanitizer builds replace malloc themselves; jemalloc cannot be preloaded under them.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

bool jemalloc_installed() { return !kSanitized && std::filesystem::exists(COREPOOL_JEMALLOC_LIBRARY); }

TEST(AllocatorTest, ThisTestBinaryRunsOnTheSystemAllocatorUnlessPreloaded) {
  const bool preloaded = std::getenv("LD_PRELOAD") && std::string(std::getenv("LD_PRELOAD")).find("jemalloc") !=
                                                          std::string::npos;
  EXPECT_EQ(allocator_in_use(), preloaded ? "jemalloc" : "system");
  EXPECT_EQ(jemalloc_mapped(), preloaded);
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

// A process on the system allocator that asks for jemalloc is re-executed with
// it preloaded; afterwards jemalloc is really mapped and answering, and the
// user's (empty) LD_PRELOAD is back for the programs it starts.
TEST(AllocatorTest, AskingForJemallocReExecutesOntoIt) {
  if (!jemalloc_installed()) GTEST_SKIP() << COREPOOL_JEMALLOC_LIBRARY << " is not installed, or this is a sanitizer build";
  const testing::ProcessResult r = run_child("jemalloc", "");
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find("child: re-executed, on jemalloc"), std::string::npos) << r.out;
}

// A process with jemalloc preloaded that asks for the system allocator is
// re-executed without it; the user's LD_PRELOAD is restored afterwards.
TEST(AllocatorTest, AskingForTheSystemAllocatorReExecutesWithoutJemalloc) {
  if (!jemalloc_installed()) GTEST_SKIP() << COREPOOL_JEMALLOC_LIBRARY << " is not installed, or this is a sanitizer build";
  const testing::ProcessResult r = run_child("system", COREPOOL_JEMALLOC_LIBRARY);
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find("child: re-executed, on system"), std::string::npos) << r.out;
}

TEST(AllocatorTest, AlreadyOnTheWantedAllocatorNothingHappens) {
  // No re-exec (which would replace this test process): the wanted one runs.
  EXPECT_EQ(ensure_allocator(allocator_in_use(), nullptr), "");
}

// ---- Run by the tests above in a fresh process, never on their own. ----

// This process's argv, as ensure_allocator re-executes it.
std::vector<std::string> own_argv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
  return args;
}

TEST(DISABLED_AllocatorChild, SwitchesTo) {
  const char* wanted_env = std::getenv(kChildEnv);
  ASSERT_NE(wanted_env, nullptr) << "run only by the AllocatorTest tests";
  const std::string wanted = wanted_env;
  // First pass: note the LD_PRELOAD the parent gave, then ask; ensure_allocator
  // replaces this process and the test starts again from the top in the
  // re-executed one, which finds the note.
  const bool reexecuted = std::getenv(kPassEnv) != nullptr;
  if (!reexecuted) {
    const char* preload = std::getenv("LD_PRELOAD");
    ::setenv(kPassEnv, preload ? preload : "", 1);
  }
  const std::string user_preload = std::getenv(kPassEnv);
  std::vector<std::string> args = own_argv();
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string why = ensure_allocator(wanted, argv.data());
  ASSERT_TRUE(reexecuted) << "ensure_allocator returned without re-executing: " << why;
  EXPECT_EQ(why, "");
  EXPECT_EQ(jemalloc_mapped(), wanted == "jemalloc");
  EXPECT_EQ(!jemalloc_version().empty(), wanted == "jemalloc") << jemalloc_version();
  EXPECT_EQ(allocator_in_use(), wanted);
  // LD_PRELOAD as the parent test set it before the switch (it is restored),
  // and no marker left for the programs this process starts.
  const char* now = std::getenv("LD_PRELOAD");
  EXPECT_EQ(now ? now : "", user_preload);
  EXPECT_EQ(std::getenv("COREPOOL_ALLOCATOR_REEXEC"), nullptr);
  std::printf("child: re-executed, on %s\n", wanted.c_str());
}

}  // namespace
}  // namespace corepool
