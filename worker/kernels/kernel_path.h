// engine.kernels: which kernels run the layers corepool rewrites under
// engine.optimize = "onednn", and whether this CPU can run them. The ISA
// choice of the whole engine in one place: the graph passes
// (worker/optimize/winograd_rewrite.h, linear_rewrite.h) ask here, so that any
// machine can run every path it can execute, not only the one its CPU picks.
// Plain functions over a plain enum; the probes are cached, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace corepool {

enum class KernelPath {
  kAuto,      // the CPU's own choice, per model (oneDNN's Winograd on AVX-512, else corepool's, ...)
  kOnednn,    // oneDNN's Winograd convolutions and inner products
  kCorepool,  // corepool's Winograd F(4x4,3x3) and packed GEMM, AVX2 + FMA (winograd_f43.h, packed_gemm.h)
  kPortable,  // corepool's Winograd with its non-AVX2 transforms and oneDNN's sgemm; oneDNN's inner products
  kTorch,     // no rewrite: LibTorch's own layers (after freeze and optimize_for_inference)
};

// "auto", "onednn", "corepool", "portable", "torch": the values engine.kernels takes.
const std::vector<std::string>& kernel_path_names();
const char* kernel_path_name(KernelPath path);
std::optional<KernelPath> parse_kernel_path(const std::string& name);

// "" when this CPU runs `path`, else why not (one sentence). auto, portable
// and torch run everywhere; onednn needs oneDNN's Winograd (AVX-512 in oneDNN
// 2.6), corepool needs AVX2 + FMA.
std::string kernel_path_unavailable(KernelPath path);

// The paths this CPU runs, auto first: what `corepool doctor` lists.
std::vector<KernelPath> runnable_kernel_paths();

}  // namespace corepool
