// OpenBLAS keeps its own thread pool next to OpenMP's: we reach its setter
// through dlsym so that the build does not depend on which BLAS is installed.
#include "worker/runtime.h"

#include <dlfcn.h>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/version.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <spdlog/spdlog.h>

namespace corepool {
namespace {

// The inter-op count this process set (0 = not yet). Kept here because asking
// LibTorch (at::get_num_interop_threads) would start the pool's threads, which a
// supervisor must not own when it forks.
int applied_inter_op = 0;

// Looked up once per process image, in the supervisor before it forks:
// dlsym(RTLD_DEFAULT) walks every loaded library's symbol tables, and a
// forked worker reads them through page faults (fork copies no page table of
// a file mapping). In each worker that one lookup took 10-23 ms of a 90-125 ms
// boot (Silero, AMD EPYC Zen 5); with the pointer inherited it is gone.
struct OpenBlas {
  using SetFn = void (*)(int);
  using GetFn = int (*)();
  SetFn set = reinterpret_cast<SetFn>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  GetFn get = reinterpret_cast<GetFn>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
};
const OpenBlas& openblas() {
  static const OpenBlas found;
  return found;
}

void set_openblas_threads(int n) {
  if (openblas().set) openblas().set(n);
}

int openblas_threads() { return openblas().get ? openblas().get() : -1; }

}  // namespace

// The profiling graph executor spends the first calls of every forward()
// profiling and re-optimising the graph; for CPU inference it fuses nothing
// that matters here (steady-state time measured unchanged) but it makes a
// freshly forked worker's first answer 30-40 ms slower, and a thread-mode
// engine's warm-up 60-110 ms instead of 18-24 (Silero VAD, AMD EPYC Zen 4).
// The switch is thread_local in LibTorch: each engine thread sets its own.
void configure_engine_thread() { torch::jit::setGraphExecutorOptimize(false); }

bool configure_runtime_threads(const RuntimeThreads& threads) {
  bool ok = true;
  openblas();  // resolved here, so in the supervisor's main before any fork
  configure_engine_thread();
  if (threads.intra_op > 0) {
    at::set_num_threads(threads.intra_op);  // also omp_set_num_threads under OpenMP
    set_openblas_threads(threads.intra_op);
  }
  if (threads.inter_op == 0) return ok;  // LibTorch's default, as an unconfigured engine runs
  // Reading the inter-op count creates the pool, after which it can no longer
  // be set: so set it first and only once per process.
  if (applied_inter_op == 0) {
    try {
      at::set_num_interop_threads(threads.inter_op);
      applied_inter_op = threads.inter_op;
    } catch (const c10::Error& e) {
      spdlog::warn("inter-op threads could not be set to {}: {}", threads.inter_op,
                   e.what_without_backtrace());
      ok = false;
    }
  } else if (applied_inter_op != threads.inter_op) {
    spdlog::warn("inter-op threads stay at {} (asked for {}): set once per process",
                 applied_inter_op, threads.inter_op);
    ok = false;
  }
  return ok;
}

int configured_interop_threads() { return applied_inter_op; }

std::string describe_runtime_threads() {
  return "intra-op threads " + std::to_string(at::get_num_threads()) + ", inter-op threads " +
         std::to_string(applied_inter_op) + ", OpenBLAS threads " + std::to_string(openblas_threads());
}

int intra_op_threads_now() { return at::get_num_threads(); }

std::string libtorch_version() { return TORCH_VERSION; }

// Compile-time answer: asking at::get_parallel_info() would create the inter-op
// pool, and a process that forks workers must not own threads it cannot hand on.
const char* parallel_backend() {
#if AT_PARALLEL_OPENMP
  return "OpenMP";
#elif AT_PARALLEL_NATIVE_TBB
  return "native + TBB";
#else
  return "native";
#endif
}

bool onednn_available() { return at::hasMKLDNN(); }

}  // namespace corepool
