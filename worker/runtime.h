// Process-wide LibTorch / BLAS / OpenMP thread settings. They are global to the
// process and must be set once, before the first LibTorch op (and, in process
// mode, by each child after fork). Called by main() and by workers.
#pragma once

#include <string>

namespace corepool {

struct RuntimeThreads {
  int intra_op = 1;  // at::set_num_threads; also OpenMP and OpenBLAS. 0 = leave LibTorch's default
  int inter_op = 1;  // at::set_num_interop_threads. 0 = leave LibTorch's default
};

// Applies the settings. Safe to call more than once; the inter-op count can only
// be set before the first inter-op use, so later different values are ignored
// with a warning. Returns false if a setting could not be applied.
bool configure_runtime_threads(const RuntimeThreads& threads);

// The per-thread half of the settings, for a thread that runs forward() and
// was not the one configure_runtime_threads ran on (thread mode's engines):
// LibTorch keeps the graph executor's optimisation switch per thread, so an
// engine thread left at its default profiles and re-optimises the graph on
// its first calls. configure_runtime_threads calls it for its own thread.
void configure_engine_thread();

// The inter-op count set by configure_runtime_threads (0 if never called).
int configured_interop_threads();

// LibTorch facts for reports (doctor, --version), so that callers need not
// include LibTorch's headers. None of them starts a thread pool.
int intra_op_threads_now();           // at::get_num_threads()
std::string libtorch_version();       // TORCH_VERSION, e.g. "1.13.1"
const char* parallel_backend();       // "OpenMP", "native + TBB" or "native" (compile time)
bool onednn_available();              // at::hasMKLDNN()

// What the runtime reports now (at::get_num_threads etc.), as one log line.
std::string describe_runtime_threads();

}  // namespace corepool
