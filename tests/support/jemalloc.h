// jemalloc's mallctl and statistics for tests that run a child on jemalloc
// (preloaded, never linked: looked up at run time), and the way they start
// that child. Header-only, no LibTorch. The test binary must define
// COREPOOL_JEMALLOC_LIBRARY (tests/CMakeLists.txt).
#pragma once

#include <dlfcn.h>
#include <stdlib.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "tests/support/process.h"
#include "tests/support/sanitized.h"
#include "tests/support/temp_dir.h"

// Sanitizer builds replace malloc themselves: a preloaded jemalloc is mapped
// and answers mallctl, but malloc and free are the sanitizer's (kSanitized).
namespace corepool::testing {

// A child can run on jemalloc: it is installed and this is no sanitizer build.
inline bool jemalloc_usable() { return !kSanitized && std::filesystem::exists(COREPOOL_JEMALLOC_LIBRARY); }

// Runs this binary's `disabled_test` in a child with jemalloc preloaded and
// MALLOC_CONF=`malloc_conf`. Our own LD_PRELOAD is not the child's business.
inline ProcessResult run_self_test_on_jemalloc(const std::string& disabled_test, const std::string& malloc_conf,
                                               std::chrono::seconds timeout = std::chrono::seconds(120)) {
  TempDir dir;
  ::unsetenv("LD_PRELOAD");
  return run_self_test(disabled_test, dir.path(), timeout,
                       {std::string("LD_PRELOAD=") + COREPOOL_JEMALLOC_LIBRARY, "MALLOC_CONF=" + malloc_conf});
}

using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);

// jemalloc's mallctl when jemalloc is in this process, else nullptr.
inline Mallctl find_mallctl() { return reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl")); }

// Pages jemalloc holds dirty (freed, not yet given back) over every arena,
// as its statistics say after an epoch refresh; -1 without mallctl.
inline long jemalloc_dirty_pages() {
  const Mallctl mallctl = find_mallctl();
  uint64_t epoch = 1;
  size_t size = sizeof(epoch);
  if (!mallctl || mallctl("epoch", &epoch, &size, &epoch, sizeof(epoch)) != 0) return -1;
  size_t pages = 0;
  size = sizeof(pages);
  if (mallctl("stats.arenas.4096.pdirty", &pages, &size, nullptr, 0) != 0) return -1;
  return static_cast<long>(pages);
}

}  // namespace corepool::testing
