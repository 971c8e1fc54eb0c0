// corepool-winograd-bench: each 3x3 convolution of CNN10 (the shapes of
// build/models/cnn10: 64 mel bins x 101 frames, halved by every block), one
// thread, as corepool's own Winograd F(4x4, 3x3) runs it (worker/
// winograd_f43.h) with its packed kernel and with oneDNN's sgemm, against
// LibTorch's own convolution of the same input. Prints the best of --reps calls
// per layer and the speed in GFLOP/s of the direct convolution's arithmetic
// (2 * 9 * C * O * H * W per item), so that the rows compare with the
// roofline `corepool bench` prints; every result is checked against
// LibTorch's. --block-kb tries another scratch size per block of tile rows.
#include <algorithm>
#include <cstdio>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/script.h>

#include "bench/best_ms.h"
#include "worker/kernels/packed_gemm.h"
#include "worker/runtime.h"
#include "worker/kernels/winograd_f43.h"

namespace {

struct Layer {
  int64_t in, out, height, width;
};

// CNN10's convolutions from 16 channels up (the first, from one channel, is
// not a Winograd layer).
const std::vector<Layer> kCnn10 = {{64, 64, 64, 101},  {64, 128, 32, 50},  {128, 128, 32, 50}, {128, 256, 16, 25},
                                   {256, 256, 16, 25}, {256, 512, 8, 12},  {512, 512, 8, 12}};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"corepool-winograd-bench: CNN10's 3x3 convolutions, corepool's Winograd against LibTorch's"};
  int64_t batch = 2, block_kb = 0;
  int reps = 7;
  app.add_option("--batch", batch, "items per call")->check(CLI::PositiveNumber);
  app.add_option("--block-kb", block_kb, "scratch per block of tile rows in KB (0: the layer's default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--reps", reps, "calls per row; the best is printed")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  corepool::configure_runtime_threads({1, 1});
  c10::InferenceMode guard;
  at::manual_seed(1);
  std::printf("CNN10's 3x3 convolutions, batch %lld, one thread (%s), best of %d calls; GFLOP/s of the direct "
              "convolution's arithmetic; packed kernel %s\n",
              static_cast<long long>(batch), corepool::describe_runtime_threads().c_str(), reps,
              corepool::packed_gemm_available() ? "available" : "unavailable (AVX2 + FMA missing): packed = sgemm");
  std::printf("%5s %5s %9s %12s %12s %12s %10s %12s\n", "C", "O", "map", "LibTorch ms", "sgemm ms", "packed ms",
              "GFLOP/s", "max |diff|");
  double total[3] = {0, 0, 0};
  for (const Layer& l : kCnn10) {
    const at::Tensor w = at::randn({l.out, l.in, 3, 3}) * (1.0 / std::sqrt(9.0 * l.in));
    const at::Tensor bias = at::randn({l.out});
    const at::Tensor x = at::randn({batch, l.in, l.height, l.width});
    corepool::WinogradF43::Options sgemm{false, block_kb * 1024}, packed{true, block_kb * 1024};
    const corepool::WinogradF43 by_sgemm(w, bias, true, sgemm), by_packed(w, bias, true, packed);
    const at::Tensor want = at::relu(at::conv2d(x, w, bias, 1, 1));
    const double diff = std::max((by_sgemm.run(x) - want).abs().max().item<double>(),
                                 (by_packed.run(x) - want).abs().max().item<double>());
    const double ms[3] = {corepool::best_ms([&] { (void)at::relu(at::conv2d(x, w, bias, 1, 1)); }, reps),
                          corepool::best_ms([&] { (void)by_sgemm.run(x); }, reps), corepool::best_ms([&] { (void)by_packed.run(x); }, reps)};
    for (int i = 0; i < 3; ++i) total[i] += ms[i];
    const double gflop = 2.0 * 9 * l.in * l.out * l.height * l.width * batch / 1e9;
    std::printf("%5lld %5lld %4lldx%-4lld %12.2f %12.2f %12.2f %10.1f %12.2g\n", static_cast<long long>(l.in),
                static_cast<long long>(l.out), static_cast<long long>(l.height), static_cast<long long>(l.width), ms[0],
                ms[1], ms[2], gflop / ms[2] * 1e3, diff);
  }
  std::printf("%5s %5s %9s %12.2f %12.2f %12.2f\n", "all", "", "", total[0], total[1], total[2]);
  return 0;
}
