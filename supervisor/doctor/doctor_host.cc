// Every fact comes from the running process, not from build-time assumptions:
// the library sgemm_ really resolves to, the ISA the kernel reports, the
// allocator that really serves malloc. The fixes name the exact command.
#include "supervisor/doctor/doctor_host.h"

#include <dlfcn.h>

#include <climits>
#include <cstdlib>

#include "supervisor/pool/allocator.h"
#include "worker/runtime.h"

namespace corepool {
namespace {

// The Debian alternative that routes libblas.so.3 to OpenBLAS.
constexpr const char* kBlasFix =
    "sudo update-alternatives --set libblas.so.3-x86_64-linux-gnu "
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 (or: sudo apt install libopenblas0-pthread)";

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (!value) return std::nullopt;
  return std::string(value);
}

bool has_flag(const std::vector<std::string>& flags, const std::string& flag) {
  for (const auto& f : flags) {
    if (f == flag) return true;
  }
  return false;
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// True when `dir` is one of the entries of an LD_LIBRARY_PATH value.
bool in_search_path(const std::string& dir, const std::string& search_path) {
  size_t begin = 0;
  while (begin <= search_path.size()) {
    size_t end = search_path.find_first_of(":;", begin);
    if (end == std::string::npos) end = search_path.size();
    std::string entry = search_path.substr(begin, end - begin);
    while (entry.size() > 1 && entry.back() == '/') entry.pop_back();
    if (!entry.empty() && entry == dir) return true;
    begin = end + 1;
  }
  return false;
}

CheckResult libtorch_check() {
  return CheckResult::ok("libtorch", libtorch_version() + ", " + parallel_backend() +
                                         " backend, " + std::to_string(intra_op_threads_now()) +
                                         " intra-op / " + std::to_string(configured_interop_threads()) +
                                         " inter-op thread(s)");
}

CheckResult onednn_check() {
  if (onednn_available()) return CheckResult::ok("onednn", "available (convolutions use oneDNN kernels)");
  return CheckResult::warn("onednn", "not built into this LibTorch: convolutions run on slower ATen kernels",
                           "install a LibTorch built with oneDNN (Debian's libtorch-dev 1.13 has it)");
}

CheckResult isa_check(const HostPaths& paths) {
  const std::string cpuinfo = read_whole_file(paths.proc + "/cpuinfo").value_or("");
  return isa_verdict(cpu_flags(cpuinfo), env("ATEN_CPU_CAPABILITY"));
}

}  // namespace

BlasLibrary find_blas_library() {
  BlasLibrary blas;
  // RTLD_DEFAULT searches the global scope in load order, exactly as the
  // loader bound LibTorch's own sgemm_ calls. Debian's libtorch needs both
  // libblas.so.3 and (through liblapack.so.3) libopenblas.so.0, and the first
  // one loaded wins: OpenBLAS being present proves nothing.
  void* sgemm = ::dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info info{};
  if (!sgemm || ::dladdr(sgemm, &info) == 0 || !info.dli_fname) return blas;
  blas.loaded_as = info.dli_fname;
  char resolved[PATH_MAX];
  blas.real_path = ::realpath(info.dli_fname, resolved) ? resolved : blas.loaded_as;
  using ConfigFn = char* (*)();
  auto config = reinterpret_cast<ConfigFn>(::dlsym(RTLD_DEFAULT, "openblas_get_config"));
  if (config && blas.real_path.find("openblas") != std::string::npos) blas.openblas_config = config();
  return blas;
}

CheckResult blas_verdict(const BlasLibrary& blas, const std::string& ld_library_path) {
  const std::string& path = blas.real_path;
  if (blas.loaded_as.empty()) {
    return CheckResult::warn("blas", "sgemm_ is not resolvable in this process: cannot tell which BLAS runs",
                             "check `ldd $(command -v corepool) | grep blas`");
  }
  const std::string where = "sgemm_ from " + path;
  if (path.find("/blas/") != std::string::npos) {
    const std::string dir = directory_of(blas.loaded_as);
    const bool via_env = in_search_path(dir, ld_library_path);
    return CheckResult::fail("blas", "reference BLAS (10-50x slower gemm): " + where,
                             via_env ? "remove " + dir + " from LD_LIBRARY_PATH (its libblas.so.3 is the reference BLAS)"
                                     : std::string(kBlasFix));
  }
  if (path.find("openblas") != std::string::npos) {
    return CheckResult::ok("blas", (blas.openblas_config.empty() ? "OpenBLAS" : blas.openblas_config) + ", " + where);
  }
  for (const char* vendor : {"mkl", "blis", "atlas"}) {
    if (path.find(vendor) != std::string::npos) return CheckResult::ok("blas", where);
  }
  return CheckResult::warn("blas", "unrecognised BLAS: " + where,
                           "make sure it is an optimised BLAS (OpenBLAS, MKL, BLIS); " + std::string(kBlasFix));
}

CheckResult isa_verdict(const std::vector<std::string>& flags, const std::optional<std::string>& aten_capability) {
  const bool avx2 = has_flag(flags, "avx2") && has_flag(flags, "fma");
  const bool avx512 = has_flag(flags, "avx512f");
  const bool amx = has_flag(flags, "amx_tile");
  std::string found = std::string("AVX2 ") + (avx2 ? "yes" : "no") + ", AVX-512 " + (avx512 ? "yes" : "no") +
                      ", AMX " + (amx ? "yes" : "no");
  if (flags.empty()) found = "no flags in /proc/cpuinfo";
  if (!avx2) {
    return CheckResult::warn("cpu-isa", found + ": LibTorch and oneDNN fall back to SSE kernels, several times slower",
                             "run on a CPU with AVX2 and FMA (x86-64-v3); in a VM pass the host CPU model through");
  }
  // LibTorch 1.13 reads ATEN_CPU_CAPABILITY once to pick its kernels;
  // "default" means the pre-AVX ones (avx2 on an AVX-512 host is a choice).
  if (aten_capability && *aten_capability == "default") {
    return CheckResult::warn("cpu-isa", found + ", but ATEN_CPU_CAPABILITY=" + *aten_capability + " holds kernels back",
                             "unset ATEN_CPU_CAPABILITY");
  }
  return CheckResult::ok("cpu-isa", found);
}

CheckResult thread_env_verdict(const std::string& name, const std::optional<std::string>& value, int intra) {
  const std::string fix = "unset " + name + " (corepool sets thread counts itself)";
  if (!value) return CheckResult::ok(name, "unset");
  const std::optional<long> count = thread_count(*value);
  if (!count) return CheckResult::warn(name, "\"" + *value + "\" is not a thread count", fix);
  if (*count > intra) {
    return CheckResult::warn(name, *value + ", above the " + std::to_string(intra) +
                                       " intra-op thread(s): each worker may start " + std::to_string(*count) +
                                       " threads (oversubscription)",
                             fix);
  }
  return CheckResult::ok(name, *value + " (not above the " + std::to_string(intra) + " intra-op thread(s))");
}

CheckResult pinning_env_verdict(const std::string& name, const std::string& value) {
  if (value.empty() || value == "disabled" || value == "none") return CheckResult::ok(name, "\"" + value + "\"");
  return CheckResult::warn(name, value + ": OpenMP pins every worker's threads to the same cpus, against corepool's own pinning",
                           "unset " + name + " (corepool pins engine threads and workers itself)");
}

CheckResult allocator_verdict(const std::string& in_use, const std::string& wanted) {
  if (in_use == "jemalloc") {
    return CheckResult::ok("allocator", "jemalloc, MALLOC_CONF=" + env("MALLOC_CONF").value_or("(unset)"));
  }
  const std::string why = "system (glibc malloc): it returns LibTorch's large per-forward buffers to the kernel "
                          "and faults them in again, and fragments under them";
  if (wanted == "jemalloc") {
    return CheckResult::warn("allocator", why + "; jemalloc was configured but could not be preloaded",
                             "sudo apt install libjemalloc2");
  }
  return CheckResult::warn("allocator", why, "set allocator = \"jemalloc\" in [engine] (or --allocator jemalloc)");
}

CheckResult thp_check(const std::string& sys_root) {
  const std::string dir = sys_root + "/kernel/mm/transparent_hugepage/";
  const std::optional<std::string> enabled_text = read_whole_file(dir + "enabled");
  if (!enabled_text) return CheckResult::ok("thp", "transparent huge pages not available in this kernel");
  const std::string enabled = selected_choice(*enabled_text);
  const std::string defrag = selected_choice(read_whole_file(dir + "defrag").value_or(""));
  const std::string found = "enabled " + enabled + ", defrag " + (defrag.empty() ? "unknown" : defrag);
  if (enabled == "never") {
    return CheckResult::ok("thp", found + ": 4 KB pages only (process mode's weight arena is then shared, and each "
                                          "worker maps it in at start)");
  }
  // LibTorch 1.13 and jemalloc's default (opt.thp "default") never call
  // madvise(MADV_HUGEPAGE); process mode's weight arena does (weight_arena.h).
  if (enabled == "madvise") {
    return CheckResult::ok("thp", found + ": only regions that ask: process mode's weight arena (its workers start "
                                          "with it mapped), not LibTorch's or jemalloc's");
  }
  if (enabled != "always") {
    return CheckResult::warn("thp", "cannot read the mode from " + dir + "enabled", "check " + dir + "enabled");
  }
  // "always" + defrag "always": a page fault on a fresh activation buffer
  // may stall in direct reclaim and compaction to assemble a 2 MB page.
  if (defrag == "always") {
    return CheckResult::warn("thp", found + ": page faults on fresh buffers can stall in direct compaction",
                             "echo defer+madvise | sudo tee " + dir + "defrag");
  }
  return CheckResult::ok("thp", found + ": huge pages without fault-time compaction (RSS may exceed jemalloc's own figures)");
}

std::vector<CheckResult> process_checks(int intra, const std::string& wanted_allocator, const HostPaths& paths) {
  std::vector<CheckResult> results = {libtorch_check(), blas_verdict(find_blas_library(), env("LD_LIBRARY_PATH").value_or("")),
                                      onednn_check(), isa_check(paths)};
  for (const char* name : {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    results.push_back(thread_env_verdict(name, env(name), intra));
  }
  for (const char* name : {"GOMP_CPU_AFFINITY", "KMP_AFFINITY"}) {
    if (const auto value = env(name)) results.push_back(pinning_env_verdict(name, *value));
  }
  results.push_back(allocator_verdict(allocator_in_use(), wanted_allocator));
  results.push_back(thp_check(paths.sys));
  return results;
}

}  // namespace corepool
