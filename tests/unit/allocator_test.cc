// The allocator switch, for real: this test binary (not linked with jemalloc)
// re-runs itself on one DISABLED_ test that calls ensure_allocator, which
// re-executes the process with LD_PRELOAD adjusted. The child then checks the
// switch from outside the code under test: the libraries mapped into it
// (/proc/self/maps) and jemalloc's own mallctl answering. Also: the systemd
// unit states corepool's default MALLOC_CONF (so the two cannot drift apart).
#include "supervisor/pool/allocator.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/jemalloc.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "worker/host/allocator_child.h"

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

using testing::find_mallctl;
using testing::Mallctl;

// jemalloc's version through its own mallctl, "" when no mallctl is resolvable.
std::string jemalloc_version() {
  const Mallctl mallctl = find_mallctl();
  if (!mallctl) return "";
  const char* version = nullptr;
  size_t size = sizeof(version);
  return mallctl("version", &version, &size, nullptr, 0) == 0 && version ? version : "";
}

// Runs DISABLED_AllocatorChild.`test` with jemalloc preloaded and `malloc_conf`.
testing::ProcessResult run_on_jemalloc(const std::string& test, const std::string& malloc_conf) {
  return testing::run_self_test_on_jemalloc("DISABLED_AllocatorChild." + test, malloc_conf, std::chrono::seconds(60));
}

// Runs DISABLED_AllocatorChild.`test` (SwitchesTo by default) asking for `wanted`, with LD_PRELOAD
// set to `preload` (unset when empty) and OPENBLAS_NUM_THREADS to
// `blas_threads` (unset when empty); returns what it printed. `test`:
// Launched plays the launcher first (sets the launch environment, executes
// itself), then the engine.
testing::ProcessResult run_child(const std::string& wanted, const std::string& preload,
                                 const std::string& blas_threads = "", const std::string& test = "SwitchesTo") {
  testing::TempDir dir;
  std::vector<std::string> env = {std::string(kChildEnv) + "=" + wanted};
  if (!preload.empty()) env.push_back("LD_PRELOAD=" + preload);
  if (!blas_threads.empty()) env.push_back("OPENBLAS_NUM_THREADS=" + blas_threads);
  ::unsetenv("LD_PRELOAD");  // ours is not the child's business
  ::unsetenv("OPENBLAS_NUM_THREADS");
  ::unsetenv(kPassEnv);
  const auto child =
      testing::spawn_process(testing::self_test_argv("DISABLED_AllocatorChild." + test), dir.path(), env);
  return testing::wait_process(child, std::chrono::seconds(60));
}

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

// `corepool batch` gets jemalloc's huge pages, every other command the
// default; the subcommand is the first word that names one, after any
// global flags and their values.
TEST(AllocatorTest, OnlyTheBatchCommandAsksForHugePages) {
  const std::string batch = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,thp:always";
  EXPECT_EQ(kBatchMallocConf, batch);
  EXPECT_EQ(batch.rfind(kDefaultMallocConf, 0), 0u) << "the batch conf is the default plus huge pages";
  const auto conf = [](std::vector<std::string> words) {
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    return std::string(malloc_conf_for(argv.data()));
  };
  EXPECT_EQ(conf({"corepool", "batch", "--model", "m", "a.wav"}), batch);
  EXPECT_EQ(conf({"corepool", "--log-level", "debug", "batch", "serve.wav"}), batch);
  EXPECT_EQ(conf({"corepool", "serve", "--model", "batch"}), kDefaultMallocConf);
  EXPECT_EQ(conf({"corepool", "bench"}), kDefaultMallocConf);
  EXPECT_EQ(conf({"corepool", "--help"}), kDefaultMallocConf);
  EXPECT_EQ(conf({"corepool"}), kDefaultMallocConf);
  EXPECT_STREQ(malloc_conf_for(nullptr), kDefaultMallocConf);
}

// A process on the system allocator that asks for jemalloc is re-executed with
// it preloaded; afterwards jemalloc is really mapped and answering, and the
// user's (empty) LD_PRELOAD is back for the programs it starts.
TEST(AllocatorTest, AskingForJemallocReExecutesOntoIt) {
  if (!testing::jemalloc_usable()) GTEST_SKIP() << COREPOOL_JEMALLOC_LIBRARY << " is not installed, or this is a sanitizer build";
  const testing::ProcessResult r = run_child("jemalloc", "");
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find("child: re-executed, on jemalloc"), std::string::npos) << r.out;
}

// A process with jemalloc preloaded that asks for the system allocator is
// re-executed without it; the user's LD_PRELOAD is restored afterwards.
TEST(AllocatorTest, AskingForTheSystemAllocatorReExecutesWithoutJemalloc) {
  if (!testing::jemalloc_usable()) GTEST_SKIP() << COREPOOL_JEMALLOC_LIBRARY << " is not installed, or this is a sanitizer build";
  const testing::ProcessResult r = run_child("system", COREPOOL_JEMALLOC_LIBRARY);
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find("child: re-executed, on system"), std::string::npos) << r.out;
}

TEST(AllocatorTest, AlreadyOnTheWantedAllocatorNothingHappens) {
  // No re-exec (which would replace this test process): the wanted one runs
  // and OpenBLAS's thread count is set (an unset one re-executes: below).
  ::setenv("OPENBLAS_NUM_THREADS", "1", 0);
  EXPECT_EQ(ensure_allocator(allocator_in_use(), nullptr), "");
}

// OpenBLAS's pool starts before main(): a process without a thread count is
// re-executed with OPENBLAS_NUM_THREADS=1, even on the allocator it wants.
TEST(AllocatorTest, AnUnsetOpenblasThreadCountReExecutesWithOne) {
  const testing::ProcessResult r = run_child("system", "");
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find("child: OPENBLAS_NUM_THREADS=1\n"), std::string::npos) << r.out;
}

// A count the user set is kept through the allocator's re-exec.
TEST(AllocatorTest, TheUsersOpenblasThreadCountIsKept) {
  if (!testing::jemalloc_usable()) GTEST_SKIP() << COREPOOL_JEMALLOC_LIBRARY << " is not installed, or this is a sanitizer build";
  const testing::ProcessResult r = run_child("jemalloc", "", "3");
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find("child: OPENBLAS_NUM_THREADS=3\n"), std::string::npos) << r.out;
}

// The launcher's environment puts the engine on jemalloc in its one exec:
// ensure_allocator then returns at once (no second exec), and the user's
// LD_PRELOAD (here another library, kept) is back for the programs it starts.
TEST(AllocatorTest, ALaunchedEngineRunsOnJemallocWithoutReExecuting) {
  if (!testing::jemalloc_usable()) GTEST_SKIP() << COREPOOL_JEMALLOC_LIBRARY << " is not installed, or this is a sanitizer build";
  const testing::ProcessResult r = run_child("jemalloc", "libm.so.6", "", "Launched");
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find("child: launched, on jemalloc after 1 exec(s)"), std::string::npos) << r.out;
}

// Asked for the system allocator, a launched engine re-executes once without jemalloc.
TEST(AllocatorTest, ALaunchedEngineAskedForTheSystemAllocatorReExecutesOnce) {
  if (!testing::jemalloc_usable()) GTEST_SKIP() << COREPOOL_JEMALLOC_LIBRARY << " is not installed, or this is a sanitizer build";
  const testing::ProcessResult r = run_child("system", "", "", "Launched");
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find("child: launched, on system after 2 exec(s)"), std::string::npos) << r.out;
}

// jemalloc with background threads configured: a forked process has none
// (jemalloc's own behaviour, which a worker relies on: it runs without them),
// and stop_allocator_background_thread() ends a running process's.
TEST(AllocatorTest, AForkedProcessHasNoJemallocBackgroundThreadAndStopEndsAProcesss) {
  if (!testing::jemalloc_usable()) GTEST_SKIP() << COREPOOL_JEMALLOC_LIBRARY << " is not installed, or this is a sanitizer build";
  const testing::ProcessResult r =
      run_on_jemalloc("BackgroundThreadAfterFork", "background_thread:true,dirty_decay_ms:1000");
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
}

TEST(AllocatorTest, PurgeGivesJemallocsFreedPagesBackAtOnce) {
  if (!testing::jemalloc_usable()) GTEST_SKIP() << COREPOOL_JEMALLOC_LIBRARY << " is not installed, or this is a sanitizer build";
  const testing::ProcessResult r =
      run_on_jemalloc("PurgeGivesFreedPagesBack", "background_thread:false,dirty_decay_ms:10000");
  EXPECT_TRUE(testing::child_test_passed(r)) << "exit " << r.exit_code << "\n" << r.out << r.err;
}

TEST(AllocatorTest, StoppingBackgroundThreadsOnTheSystemAllocatorChangesNothing) {
  if (find_mallctl()) GTEST_SKIP() << "this process runs jemalloc";
  EXPECT_FALSE(stop_allocator_background_thread());
}

// ---- Run by the tests above in a fresh process, never on their own. ----

// jemalloc's "background_thread" as it stands in this process; -1 without mallctl.
int background_thread_on() {
  const Mallctl mallctl = find_mallctl();
  bool on = false;
  size_t size = sizeof(on);
  if (!mallctl || mallctl("background_thread", &on, &size, nullptr, 0) != 0) return -1;
  return on ? 1 : 0;
}

TEST(DISABLED_AllocatorChild, PurgeGivesFreedPagesBack) {
  ASSERT_GE(testing::jemalloc_dirty_pages(), 0) << "jemalloc preloaded";
  std::vector<void*> blocks;
  for (int i = 0; i < 64; ++i) {
    blocks.push_back(std::malloc(64 << 10));
    std::memset(blocks.back(), 1, 64 << 10);
  }
  for (void* b : blocks) std::free(b);
  ASSERT_GT(testing::jemalloc_dirty_pages(), 0) << "4 MB freed with dirty_decay_ms:10000 must still be dirty";
  ASSERT_TRUE(purge_allocator());
  EXPECT_EQ(testing::jemalloc_dirty_pages(), 0);
}

TEST(DISABLED_AllocatorChild, BackgroundThreadAfterFork) {
  ASSERT_EQ(background_thread_on(), 1) << "jemalloc preloaded with background_thread:true";
  const pid_t worker = ::fork();
  if (worker == 0) ::_exit(background_thread_on() == 0 ? 0 : 2);
  int status = 0;
  ::waitpid(worker, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "jemalloc kept its background thread across fork: a worker would run one";
  ASSERT_TRUE(stop_allocator_background_thread());
  EXPECT_EQ(background_thread_on(), 0);
}

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
  const char* blas = std::getenv("OPENBLAS_NUM_THREADS");
  std::printf("child: OPENBLAS_NUM_THREADS=%s\n", blas ? blas : "(unset)");
}

// The launcher's part, then the engine's: pass 0 sets the launch environment
// and executes itself as the launcher does; every later pass (the launched
// engine, and any re-exec of it) asks for the wanted allocator. kPassEnv
// counts the execs and keeps the user's LD_PRELOAD.
TEST(DISABLED_AllocatorChild, Launched) {
  const char* wanted_env = std::getenv(kChildEnv);
  ASSERT_NE(wanted_env, nullptr) << "run only by the AllocatorTest tests";
  const std::string wanted = wanted_env;
  std::vector<std::string> args = own_argv();
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const char* pass = std::getenv(kPassEnv);
  if (!pass) {
    const char* preload = std::getenv("LD_PRELOAD");
    ::setenv(kPassEnv, (std::string("1 ") + (preload ? preload : "")).c_str(), 1);
    ASSERT_TRUE(set_launch_environment(argv.data()));
    ::execv("/proc/self/exe", argv.data());
    FAIL() << "execv: " << std::strerror(errno);
  }
  const std::string note = pass;
  const int execs = std::stoi(note.substr(0, note.find(' ')));
  const std::string user_preload = note.substr(note.find(' ') + 1);
  ::setenv(kPassEnv, (std::to_string(execs + 1) + " " + user_preload).c_str(), 1);
  EXPECT_FALSE(set_launch_environment(argv.data())) << "a process corepool started must not be prepared again";
  const std::string why = ensure_allocator(wanted, argv.data());
  EXPECT_EQ(why, "");
  EXPECT_EQ(jemalloc_mapped(), wanted == "jemalloc");
  EXPECT_EQ(allocator_in_use(), wanted);
  const char* now = std::getenv("LD_PRELOAD");
  EXPECT_EQ(now ? now : "", user_preload);
  EXPECT_EQ(std::getenv("COREPOOL_ALLOCATOR_REEXEC"), nullptr);
  EXPECT_EQ(std::getenv("COREPOOL_LAUNCHED_PRELOAD"), nullptr);
  std::printf("child: launched, on %s after %d exec(s)\n", wanted.c_str(), execs);
}

}  // namespace
}  // namespace corepool
