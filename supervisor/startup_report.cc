// Each fact comes from the running process, not from build-time assumptions:
// the BLAS really loaded (libblas.so.3 alternative or OpenBLAS's own report),
// the ISA the CPU really has, the thread counts LibTorch really uses.
#include "supervisor/startup_report.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>

#include <ATen/Parallel.h>
#include <ATen/Context.h>
#include <spdlog/spdlog.h>
#include <torch/version.h>

#include "worker/cpus.h"
#include "worker/runtime.h"

namespace corepool {
namespace {

std::string loaded_library_matching(const std::string& needle) {
  std::string found;
  auto cb = [](dl_phdr_info* info, size_t, void* data) -> int {
    auto* pair = static_cast<std::pair<const std::string*, std::string*>*>(data);
    std::string name = info->dlpi_name ? info->dlpi_name : "";
    if (name.find(*pair->first) != std::string::npos) {
      *pair->second = name;
      return 1;
    }
    return 0;
  };
  std::pair<const std::string*, std::string*> data{&needle, &found};
  dl_iterate_phdr(cb, &data);
  return found;
}

HostFact blas_fact() {
  using ConfigFn = char* (*)();
  if (auto fn = reinterpret_cast<ConfigFn>(::dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
    return {"BLAS", std::string("OpenBLAS ") + fn(), ""};
  }
  std::string lib = loaded_library_matching("libblas");
  if (lib.empty()) return {"BLAS", "unknown", ""};
  char resolved[4096];
  std::string real = ::realpath(lib.c_str(), resolved) ? resolved : lib;
  const bool reference = real.find("/blas/") != std::string::npos;
  return {"BLAS", real, reference ? "reference BLAS is 10-50x slower: install libopenblas0-pthread" : ""};
}

HostFact isa_fact() {
  __builtin_cpu_init();
  std::string isa = "x86-64";
  if (__builtin_cpu_supports("avx")) isa += " avx";
  if (__builtin_cpu_supports("avx2")) isa += " avx2";
  if (__builtin_cpu_supports("fma")) isa += " fma";
  if (__builtin_cpu_supports("avx512f")) isa += " avx512f";
  const bool avx2 = __builtin_cpu_supports("avx2");
  return {"CPU ISA", isa, avx2 ? "" : "no AVX2: LibTorch falls back to slow kernels"};
}

HostFact env_fact(const char* name, int intra) {
  const char* v = std::getenv(name);
  if (!v) return {name, "(unset)", ""};
  const int n = std::atoi(v);
  std::string warn;
  if (n > intra) warn = std::string(name) + "=" + v + " exceeds the intra-op setting: oversubscription";
  return {name, v, warn};
}

HostFact allocator_fact() {
  const bool jemalloc = ::dlsym(RTLD_DEFAULT, "mallctl") != nullptr;
  return {"allocator", jemalloc ? "jemalloc" : "glibc malloc", ""};
}

// Compile-time answer: asking at::get_parallel_info() would create the inter-op
// pool, and a process that forks workers must not own threads it cannot hand on.
#if AT_PARALLEL_OPENMP
constexpr const char* kParallelBackend = "OpenMP";
#elif AT_PARALLEL_NATIVE_TBB
constexpr const char* kParallelBackend = "native + TBB";
#else
constexpr const char* kParallelBackend = "native";
#endif

}  // namespace

std::vector<HostFact> collect_host_facts() {
  const int intra = at::get_num_threads();
  const CpuBudget cpus = usable_cpus();
  std::string quota = cpus.quota_cpus > 0 ? std::to_string(cpus.quota_cpus) : "none";
  std::vector<HostFact> facts = {
      {"LibTorch", TORCH_VERSION, ""},
      {"parallel backend", kParallelBackend, ""},
      blas_fact(),
      {"oneDNN (MKL-DNN)", at::hasMKLDNN() ? "on" : "off", ""},
      isa_fact(),
      {"usable cpus", std::to_string(cpus.usable) + " (affinity " + std::to_string(cpus.allowed.size()) +
                          ", cgroup quota " + quota + ")", ""},
      {"intra-op threads", std::to_string(intra), ""},
      {"inter-op threads", std::to_string(configured_interop_threads()), ""},
      env_fact("OMP_NUM_THREADS", intra),
      env_fact("MKL_NUM_THREADS", intra),
      env_fact("OPENBLAS_NUM_THREADS", intra),
      allocator_fact(),
  };
  return facts;
}

void log_host_facts() {
  for (const auto& f : collect_host_facts()) {
    spdlog::info("{}: {}", f.name, f.value);
    if (!f.warning.empty()) spdlog::warn("{}: {}", f.name, f.warning);
  }
}

int print_doctor_report() {
  int warnings = 0;
  for (const auto& f : collect_host_facts()) {
    std::printf("%-20s %s\n", f.name.c_str(), f.value.c_str());
    if (!f.warning.empty()) {
      std::printf("%-20s WARNING: %s\n", "", f.warning.c_str());
      ++warnings;
    }
  }
  std::printf("\n%d warning(s)\n", warnings);
  return warnings;
}

}  // namespace corepool
