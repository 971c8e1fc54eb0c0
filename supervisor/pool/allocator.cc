// The re-exec is the only way to choose malloc at run time: the allocator must
// be in place before the first allocation (the dynamic loader's, LibTorch's
// static constructors'), long before main() could decide anything.
#include "supervisor/pool/allocator.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

namespace corepool {
namespace {

// Marks a process that is the result of our own re-exec (value: the user's
// LD_PRELOAD, to restore), so that a failed switch can never loop.
constexpr const char* kReexecMarker = "COREPOOL_ALLOCATOR_REEXEC";
// Marks a corepool-engine the launcher started with jemalloc already
// preloaded (value: the user's LD_PRELOAD, to restore).
constexpr const char* kLaunchMarker = "COREPOOL_LAUNCHED_PRELOAD";

std::vector<std::string> split_preload(const std::string& text) {
  // ld.so separates LD_PRELOAD entries by spaces or colons.
  std::vector<std::string> out;
  std::string item;
  for (char c : text + ":") {
    if (c == ':' || c == ' ') {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  return out;
}

std::string preload_for(const std::string& wanted, const std::string& current) {
  std::string out = wanted == "jemalloc" ? COREPOOL_JEMALLOC_LIBRARY : "";
  for (const auto& entry : split_preload(current)) {
    if (entry.find("libjemalloc") != std::string::npos) continue;
    out += (out.empty() ? "" : ":") + entry;
  }
  return out;
}

// LD_PRELOAD as the user had it before corepool changed it (`original`,
// kept in a marker): the programs we start must not inherit our choice.
void restore_preload(const std::string& original) {
  if (original.empty()) {
    ::unsetenv("LD_PRELOAD");
  } else {
    ::setenv("LD_PRELOAD", original.c_str(), 1);
  }
}

}  // namespace

// Chosen by corepool-soak-bench (bench/RESULTS.md, "Soak"): background threads
// purge freed pages while the service idles (jemalloc's defaults keep them:
// RSS stayed ~275 MiB idle, not ~200), and a 1 s dirty decay instead of 10 s
// cut mean RSS 4 % (thread mode) and heap 6 % under load at the same x-real-time.
// narenas:2 saved a little more on 2 cpus but would make N engine threads share
// 2 arenas on a big machine. Forked workers lose the background threads (jemalloc
// stops them in a fork child) and purge on their own allocations instead.
const char* const kDefaultMallocConf = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";

// `corepool batch` adds transparent huge pages to jemalloc's arenas (this
// kernel's THP mode is usually "madvise": only regions that ask get them). A
// batch run is short and touches its activations and buffers for the first
// time while it runs: on a VM whose page fault costs about 12 us, a thread
// engine's warm-up took 37 ms with 4 kB pages and 21-28 ms with 2 MB ones,
// and thread-mode Silero runs of the 10-minute file 7-11 % faster (process
// mode: within the spread; peak RSS +10 %), bench/RESULTS.md. The service keeps 4 kB pages: huge pages hold
// memory a long-lived process has freed (its RSS is what "Soak" tunes).
const char* const kBatchMallocConf = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,thp:always";

const char* malloc_conf_for(char* const* argv) {
  static const char* const kCommands[] = {"batch", "merge", "eval", "serve", "bench", "tune", "doctor", "version"};
  for (int i = 1; argv && argv[i]; ++i) {
    for (const char* command : kCommands) {
      if (std::strcmp(argv[i], command) == 0) {
        return std::strcmp(command, "batch") == 0 ? kBatchMallocConf : kDefaultMallocConf;
      }
    }
  }
  return kDefaultMallocConf;
}

// OpenBLAS starts its thread pool (one thread per cpu but one) when the library
// loads, before main(), and each idle pool thread spins on sched_yield for a
// while after it starts or wakes: measured 5,000-8,000 yields per process and
// up to 56,000 involuntary context switches in one 1-s process-mode bench
// point, stealing the cpu from the forward()s. corepool runs OpenBLAS with the
// engine's intra-op count (runtime.h), 1 by default, and raising it later
// starts the threads it needs; so the re-exec below starts it at one thread
// unless the user set a count.
constexpr const char* kBlasThreadsEnv = "OPENBLAS_NUM_THREADS";

std::string allocator_in_use() { return ::dlsym(RTLD_DEFAULT, "mallctl") ? "jemalloc" : "system"; }

namespace {

// The environment of an exec onto `wanted`, for the launcher's exec and the
// engine's own re-exec alike: LD_PRELOAD with (or without) jemalloc, the
// user's LD_PRELOAD kept in `marker` to be restored after, and OpenBLAS's
// thread count and jemalloc's MALLOC_CONF unless the user set them.
void set_exec_environment(const char* marker, const std::string& wanted, char* const* argv) {
  const char* preload = std::getenv("LD_PRELOAD");
  const std::string original = preload ? preload : "";
  ::setenv(marker, original.c_str(), 1);
  const std::string next = preload_for(wanted, original);
  if (next.empty()) {
    ::unsetenv("LD_PRELOAD");
  } else {
    ::setenv("LD_PRELOAD", next.c_str(), 1);
  }
  ::setenv(kBlasThreadsEnv, "1", 0);                                         // the user's wins
  if (wanted == "jemalloc") ::setenv("MALLOC_CONF", malloc_conf_for(argv), 0);  // the user's wins
}

}  // namespace

bool set_launch_environment(char* const* argv) {
  if (std::getenv(kReexecMarker) || std::getenv(kLaunchMarker)) return false;  // started by corepool already
  if (::access(COREPOOL_JEMALLOC_LIBRARY, R_OK) != 0) return false;  // the engine's re-exec will say so
  set_exec_environment(kLaunchMarker, "jemalloc", argv);
  return true;
}

std::string ensure_allocator(const std::string& wanted, char** argv) {
  if (const char* launched = std::getenv(kLaunchMarker)) {
    // Started by the launcher on jemalloc: the user's LD_PRELOAD back, then
    // the usual rule, which re-executes only if jemalloc is not what is
    // wanted (engine.allocator = "system") or could not be preloaded.
    restore_preload(launched);
    ::unsetenv(kLaunchMarker);
  }
  if (const char* marker = std::getenv(kReexecMarker)) {
    // Second pass: restore the user's LD_PRELOAD for the programs we start.
    restore_preload(marker);
    ::unsetenv(kReexecMarker);
    if (allocator_in_use() == wanted) return "";
    return wanted == "jemalloc" ? std::string("jemalloc could not be preloaded from ") + COREPOOL_JEMALLOC_LIBRARY +
                                      " (install libjemalloc2); running on the system allocator"
                                : "jemalloc is linked into the process; it cannot be switched off";
  }
  if (allocator_in_use() == wanted && std::getenv(kBlasThreadsEnv)) return "";
  set_exec_environment(kReexecMarker, wanted, argv);
  ::execv("/proc/self/exe", argv);
  // exec failed: carry on with what we have, and say so.
  ::unsetenv(kReexecMarker);
  return "cannot re-execute /proc/self/exe to switch the allocator";
}

}  // namespace corepool
