// corepool-linear-bench: one linear layer the size of the memory benchmark's
// hidden layer (1.2M x 64 fp32, 307 MB), one thread, as LibTorch runs a frozen
// model's `x @ W.t() + b` (at::addmm: OpenBLAS's sgemm) against corepool's
// OnednnLinear (oneDNN's inner product on prepacked weights, onednn_linear.h)
// and PackedLinear (corepool's AVX2 kernel, packed_linear.h; where the CPU
// has AVX2 + FMA), and against one read of the weights (the memory floor of
// any such layer). Prints the best of 7 calls per row count; the scores must
// agree.
#include <algorithm>
#include <cstdio>

#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>
#include <torch/script.h>

#include "bench/best_ms.h"
#include "worker/kernels/onednn_linear.h"
#include "worker/kernels/packed_gemm.h"
#include "worker/kernels/packed_linear.h"
#include "worker/runtime.h"

int main(int argc, char** argv) {
  CLI::App app{"corepool-linear-bench: a large linear layer, OpenBLAS's sgemm against oneDNN on prepacked weights"};
  int64_t out = 1200000, in = 64;
  app.add_option("--out-features", out, "rows of the weight matrix")->check(CLI::PositiveNumber);
  app.add_option("--in-features", in, "columns of the weight matrix")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  corepool::configure_runtime_threads({1, 1});
  c10::InferenceMode guard;
  at::manual_seed(1);
  const at::Tensor w = at::randn({out, in}), b = at::randn({out});
  corepool::OnednnLinear layer(w, b, false);
  const bool packed_here = corepool::packed_gemm_available();
  const c10::optional<corepool::PackedLinear> packed =
      packed_here ? c10::make_optional(corepool::PackedLinear(w, b, false)) : c10::nullopt;
  const double mb = static_cast<double>(w.numel()) * 4 / 1e6;
  // One read of the weights: the floor for any layer that must stream them.
  const double read_ms = corepool::best_ms([&] { (void)w.sum().item<float>(); }, 7);
  std::printf("weights %lld x %lld fp32 (%.0f MB), one thread, %s; best of 7 calls\n", static_cast<long long>(out),
              static_cast<long long>(in), mb, corepool::describe_runtime_threads().c_str());
  std::printf("one read of the weights (sum): %.1f ms (%.1f GB/s)\n", read_ms, mb / read_ms);
  std::printf("%6s %14s %17s %10s %17s %10s %12s\n", "rows", "at::addmm ms", "OnednnLinear ms", "speed-up",
              "PackedLinear ms", "speed-up", "max |diff|");
  for (int64_t rows : {1, 2, 4, 8, 16}) {
    const at::Tensor x = at::randn({rows, in});
    const at::Tensor want = at::addmm(b, x, w.t());
    double worst = (layer.run(x) - want).abs().max().item<double>();
    const double blas = corepool::best_ms([&] { (void)at::addmm(b, x, w.t()); }, 7);
    const double onednn = corepool::best_ms([&] { (void)layer.run(x); }, 7);
    double own = 0;
    if (packed) {
      worst = std::max(worst, (packed->run(x) - want).abs().max().item<double>());
      own = corepool::best_ms([&] { (void)packed->run(x); }, 7);
    }
    std::printf("%6lld %14.3f %17.3f %9.2fx ", static_cast<long long>(rows), blas, onednn, blas / onednn);
    if (packed) {
      std::printf("%17.3f %9.2fx", own, blas / own);
    } else {
      std::printf("%17s %10s", "(no AVX2)", "");
    }
    std::printf(" %12.2g\n", worst);
  }
  std::printf("OnednnLinear kernel: %s\n", layer.kernel().c_str());
  return 0;
}
