// The doctor's checks of this process and host that need no model and take
// microseconds: LibTorch, BLAS, oneDNN, CPU ISA, the thread environment
// variables, the allocator, transparent huge pages. `corepool doctor` prints
// them; every other command logs them at startup (startup_report.cc).
// Each check reads the running process, then hands what it found to a pure
// *_verdict function that tests call directly.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "supervisor/doctor/doctor_check.h"
#include "supervisor/doctor/doctor_procfs.h"

namespace corepool {

// In checklist order. `intra` is the intra-op setting the thread variables are
// compared with; `wanted_allocator` is engine.allocator ("" when unknown).
std::vector<CheckResult> process_checks(int intra, const std::string& wanted_allocator,
                                        const HostPaths& paths = {});

// The library that really provides sgemm_: as the loader found it, after
// symlinks, and OpenBLAS's own description when it is OpenBLAS.
struct BlasLibrary {
  std::string loaded_as;  // dladdr's dli_fname, e.g. /tmp/x/libblas.so.3; "" = sgemm_ not found
  std::string real_path;  // realpath of it
  std::string openblas_config;  // openblas_get_config(), "" when not OpenBLAS
};
BlasLibrary find_blas_library();
CheckResult blas_verdict(const BlasLibrary& blas, const std::string& ld_library_path);

// From /proc/cpuinfo flags; `aten_capability` is $ATEN_CPU_CAPABILITY (nullopt = unset).
CheckResult isa_verdict(const std::vector<std::string>& flags, const std::optional<std::string>& aten_capability);

// OMP_NUM_THREADS and friends (nullopt = unset) against the intra-op setting.
CheckResult thread_env_verdict(const std::string& name, const std::optional<std::string>& value, int intra);

// GOMP_CPU_AFFINITY / KMP_AFFINITY, only reported when set.
CheckResult pinning_env_verdict(const std::string& name, const std::string& value);

CheckResult allocator_verdict(const std::string& in_use, const std::string& wanted);

// Reads <sys_root>/kernel/mm/transparent_hugepage/{enabled,defrag}.
CheckResult thp_check(const std::string& sys_root);

}  // namespace corepool
