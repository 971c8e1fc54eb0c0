// Which malloc the service and its workers run on. corepool-engine is not
// linked against jemalloc: the `corepool` launcher (supervisor/launcher.cc)
// starts it with jemalloc in LD_PRELOAD, and it re-executes itself once only
// when that is not what engine.allocator asks for (or it was started some
// other way), so that one binary can run either allocator and `corepool
// bench` can compare them point by point. Workers are forked, not executed,
// so they inherit the supervisor's allocator.
#pragma once

#include <string>

namespace corepool {

// The MALLOC_CONF corepool sets when the environment has none (measured in
// bench/RESULTS.md, "Soak"; documented in README, "Memory allocator").
extern const char* const kDefaultMallocConf;
// `corepool batch`'s: the default and jemalloc's huge pages (allocator.cc says why).
extern const char* const kBatchMallocConf;
// The MALLOC_CONF for a command line (argv[0] the program): the batch one
// when its first word that names a subcommand is "batch", else the default.
const char* malloc_conf_for(char* const* argv);

// "jemalloc" when jemalloc's mallctl is resolvable in this process, else "system".
std::string allocator_in_use();

// If this process does not run on `wanted` ("jemalloc" | "system"), or
// OPENBLAS_NUM_THREADS is unset, execv()s /proc/self/exe with the same argv,
// LD_PRELOAD adjusted and OPENBLAS_NUM_THREADS=1 unless the user set it
// (OpenBLAS's pool starts before main: allocator.cc says why); does not return
// then. Returns when nothing needs doing, or when a re-exec already happened
// and could not help (jemalloc not installed, or linked in by someone else):
// the reason is in the returned text, "" when the wanted allocator runs.
// After a re-exec, LD_PRELOAD is put back as the user had it, so that programs
// we start (gnuplot, sh) do not inherit our choice.
std::string ensure_allocator(const std::string& wanted, char** argv);

// The launcher's half: sets the environment ensure_allocator would
// re-execute with for the default allocator (jemalloc preloaded,
// OPENBLAS_NUM_THREADS and MALLOC_CONF for argv unless the user set them) and a marker
// that lets ensure_allocator restore the user's LD_PRELOAD without a re-exec.
// False, and nothing changed, when jemalloc is not installed or this process
// was itself started by corepool.
bool set_launch_environment(char* const* argv);

}  // namespace corepool
