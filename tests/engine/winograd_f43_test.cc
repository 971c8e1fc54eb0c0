// corepool's own Winograd F(4x4, 3x3) on NCHW (worker/kernels/winograd_f43.h) against
// a naive convolution in double (naive_conv.h): every map size's edge case
// (sizes that are and are not multiples of the 4x4 tile, maps smaller than a
// tile, one row or column), batches, several tile blocks per call, bias or
// none, ReLU or none; the AVX2 and the portable version. Runs on every CPU
// (no oneDNN Winograd needed).
#include <torch/csrc/jit/passes/freeze_module.h>

#include <gtest/gtest.h>

#include "tests/engine/graph_nodes.h"
#include "tests/engine/naive_conv.h"
#include "worker/kernels/winograd_f43.h"
#include "worker/optimize/winograd_rewrite.h"

namespace corepool {
namespace {

double max_error(const at::Tensor& got, const at::Tensor& want) { return (got - want).abs().max().item<double>(); }

// Both ways to run the products: corepool's packed kernel (where the CPU has
// AVX2 + FMA) and oneDNN's sgemm; and the portable path (engine.kernels =
// "portable": the transforms' non-AVX2 version and sgemm), on every CPU.
const WinogradF43::Options kPacked{true, 0}, kSgemm{false, 0}, kPortable{true, 0, false, true};

TEST(WinogradF43Test, EqualsANaiveConvolutionOnEveryMapSize) {
  const at::Tensor w = at::randn({24, 16, 3, 3}) * 0.2;
  const at::Tensor bias = at::randn({24});
  for (auto [relu, options] : std::vector<std::pair<bool, WinogradF43::Options>>{
           {false, kPacked}, {true, kPacked}, {true, kSgemm}, {true, kPortable}, {false, kPortable}}) {
    const auto conv = c10::make_intrusive<WinogradF43>(w, bias, relu, options);
    for (auto [h, wd] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {1, 9}, {9, 1}, {3, 3}, {4, 4}, {5, 7}, {8, 12}, {13, 6}, {16, 25}}) {
      for (int64_t n : {1, 3}) {
        const at::Tensor x = at::randn({n, 16, h, wd});
        const at::Tensor got = conv->run(x);
        ASSERT_EQ(got.sizes(), (std::vector<int64_t>{n, 24, h, wd}));
        EXPECT_LE(max_error(got, naive_conv3x3(x, w, bias, relu)), 1e-4)
            << n << " x " << h << " x " << wd << " relu " << relu << " packed " << conv->packed() << " avx2 "
            << conv->avx2();
      }
    }
  }
}

// Wide maps and many channels: a call runs in several blocks of tile rows
// (4 MB of scratch each: several here), the CNN10 shape included.
TEST(WinogradF43Test, ManyBlocksPerCallAndNoBiasGiveTheSameConvolution) {
  const at::Tensor w = at::randn({64, 64, 3, 3}) * 0.05;
  const auto conv = c10::make_intrusive<WinogradF43>(w, c10::nullopt, false);
  const at::Tensor x = at::randn({2, 64, 64, 101});
  EXPECT_LE(max_error(conv->run(x), naive_conv3x3(x, w, at::zeros({64}), false)), 1e-4);
  // Not contiguous: run() reads a contiguous copy.
  const at::Tensor t = at::randn({2, 64, 11, 10}).transpose(2, 3);
  EXPECT_LE(max_error(conv->run(t), naive_conv3x3(t.contiguous(), w, at::zeros({64}), false)), 1e-4);
}

// Channel counts off the kernel's grid: outputs not a multiple of its 6-row
// panels, inputs past its 256-wide chunks of k; small blocks (16 KB), so a
// call runs in many, each ending inside a tile row's vector group.
TEST(WinogradF43Test, OddChannelCountsAndSmallBlocksGiveTheSameConvolution) {
  const at::Tensor w = at::randn({20, 300, 3, 3}) * 0.02;
  const at::Tensor bias = at::randn({20});
  const at::Tensor x = at::randn({3, 300, 7, 13});
  const at::Tensor want = naive_conv3x3(x, w, bias, true);
  const WinogradF43::Options small_blocks{true, 16 << 10}, small_portable{true, 16 << 10, false, true};
  for (const WinogradF43::Options& options : {kPacked, kSgemm, kPortable, small_blocks, small_portable}) {
    const WinogradF43 conv(w, bias, true, options);
    EXPECT_LE(max_error(conv.run(x), want), 1e-4) << "packed " << conv.packed() << " block " << options.block_bytes;
  }
}

// The 2x2 average pool fused into the output transform, against LibTorch's
// avg_pool2d of the naive convolution: odd map sizes (the last row or column
// dropped), a map that pools to nothing, ReLU or none, both product paths.
TEST(WinogradF43Test, AFusedAveragePoolEqualsLibTorchsPoolOfTheConvolution) {
  const at::Tensor w = at::randn({20, 16, 3, 3}) * 0.2;
  const at::Tensor bias = at::randn({20});
  for (bool relu : {false, true}) {
    for (auto [packed, portable] : std::vector<std::pair<bool, bool>>{{true, false}, {false, false}, {true, true}}) {
      WinogradF43::Options options;
      options.packed = packed;
      options.portable = portable;
      options.avg_pool = true;
      const WinogradF43 conv(w, bias, relu, options);
      for (auto [h, wd] : std::vector<std::pair<int64_t, int64_t>>{
               {2, 2}, {3, 3}, {2, 9}, {5, 7}, {8, 12}, {13, 6}, {16, 25}, {64, 101}}) {
        const at::Tensor x = at::randn({3, 16, h, wd});
        const at::Tensor want = at::avg_pool2d(naive_conv3x3(x, w, bias, relu), {2, 2});
        const at::Tensor got = conv.run(x);
        ASSERT_EQ(got.sizes(), want.sizes()) << h << " x " << wd;
        EXPECT_LE(max_error(got, want), 1e-4)
            << h << " x " << wd << " relu " << relu << " packed " << packed << " portable " << portable;
      }
      // A map that pools to nothing is an error, as in LibTorch's avg_pool2d.
      EXPECT_THROW(conv.run(at::randn({1, 16, 1, 9})), c10::Error);
      EXPECT_THROW(at::avg_pool2d(at::randn({1, 16, 1, 9}), {2, 2}), c10::Error);
    }
  }
}

// The portable path runs the non-AVX2 transforms and oneDNN's sgemm whatever
// the CPU has; the default runs AVX2 and the packed kernel where the CPU has them.
TEST(WinogradF43Test, ThePortableOptionRunsThePortableVersionOnEveryCpu) {
  const at::Tensor w = at::randn({8, 16, 3, 3});
  const WinogradF43 portable(w, c10::nullopt, false, kPortable);
  EXPECT_FALSE(portable.avx2());
  EXPECT_FALSE(portable.packed());
  const WinogradF43 fastest(w, c10::nullopt, false);
  EXPECT_EQ(fastest.avx2(), __builtin_cpu_supports("avx2") != 0);
  EXPECT_EQ(fastest.packed(), __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
}

TEST(WinogradF43Test, WrongShapesAreErrorsNotCrashes) {
  EXPECT_THROW(WinogradF43(at::randn({8, 16, 5, 5}), c10::nullopt, false), c10::Error) << "5x5 kernel";
  EXPECT_THROW(WinogradF43(at::randn({8, 16, 3, 3}), at::randn({7}), false), c10::Error) << "bias size";
  EXPECT_THROW(WinogradF43(at::randn({8, 16, 3, 3}).to(at::kDouble), c10::nullopt, false), c10::Error);
  const WinogradF43 conv(at::randn({8, 16, 3, 3}), c10::nullopt, true);
  EXPECT_THROW(conv.run(at::randn({1, 15, 4, 4})), c10::Error) << "15 channels";
  EXPECT_THROW(conv.run(at::randn({16, 4, 4})), c10::Error) << "no batch dimension";
  EXPECT_EQ(conv.run(at::randn({0, 16, 4, 4})).size(0), 0) << "an empty batch";
}

// The graph pass: a convolution from 16 channels becomes winograd_f43 with its
// ReLU fused; one from a single channel (too few to pay) and a 5x5 one stay
// LibTorch's; the frozen module's output is unchanged.
TEST(WinogradF43Test, TheRewriteReplacesEligibleConvolutionsAndKeepsTheOutput) {
  at::manual_seed(20261127);
  torch::jit::Module m("Chain");
  m.register_parameter("a_w", at::randn({16, 1, 3, 3}) * 0.3, false);
  m.register_parameter("b_w", at::randn({32, 16, 3, 3}) * 0.1, false);
  m.register_parameter("b_b", at::randn({32}), false);
  m.register_parameter("c_w", at::randn({8, 32, 5, 5}) * 0.05, false);
  m.define(R"(
def forward(self, x):
    x = torch.relu(torch.conv2d(x, self.a_w, None, [1, 1], [1, 1]))
    x = torch.relu(torch.conv2d(x, self.b_w, self.b_b, [1, 1], [1, 1]))
    return torch.conv2d(x, self.c_w, None, [1, 1], [2, 2])
)");
  m.eval();
  torch::jit::Module reference = torch::jit::freeze(m.clone());
  torch::jit::Module rewritten = torch::jit::freeze(m.clone());
  EXPECT_EQ(rewrite_own_winograd(rewritten).own, 1);
  EXPECT_EQ(testing::count_nodes(rewritten, "corepool::winograd_f43"), 1);
  EXPECT_EQ(testing::count_nodes(rewritten, "aten::conv2d"), 2);
  EXPECT_EQ(testing::count_nodes(rewritten, "aten::relu"), 1) << "the second ReLU is fused";
  c10::InferenceMode guard;
  const at::Tensor x = at::randn({3, 1, 13, 21});
  EXPECT_LE(max_error(rewritten.forward({x}).toTensor(), reference.forward({x}).toTensor()), 1e-4);
}

// A 2x2 average pool after a convolution (and its ReLU, or straight after
// it) is fused; one with another window or padding stays LibTorch's.
TEST(WinogradF43Test, TheRewriteFusesOnlyThePoolItCanComputeAndKeepsTheOutput) {
  at::manual_seed(20261127);
  torch::jit::Module m("Pools");
  m.register_parameter("a_w", at::randn({16, 16, 3, 3}) * 0.1, false);
  m.register_parameter("b_w", at::randn({16, 16, 3, 3}) * 0.1, false);
  m.register_parameter("c_w", at::randn({16, 16, 3, 3}) * 0.1, false);
  m.define(R"(
def forward(self, x):
    x = torch.avg_pool2d(torch.relu(torch.conv2d(x, self.a_w, None, [1, 1], [1, 1])), [2, 2])
    x = torch.avg_pool2d(torch.conv2d(x, self.b_w, None, [1, 1], [1, 1]), [2, 2], [2, 2])
    return torch.avg_pool2d(torch.conv2d(x, self.c_w, None, [1, 1], [1, 1]), [2, 2], [1, 1])
)");
  m.eval();
  torch::jit::Module reference = torch::jit::freeze(m.clone());
  torch::jit::Module rewritten = torch::jit::freeze(m.clone());
  const WinogradRewrite done = rewrite_own_winograd(rewritten);
  EXPECT_EQ(done.own, 3);
  EXPECT_EQ(done.own_pooled, 2);
  EXPECT_EQ(testing::count_nodes(rewritten, "aten::avg_pool2d"), 1) << "the stride-1 pool stays";
  EXPECT_EQ(testing::count_nodes(rewritten, "aten::relu"), 0) << "the ReLU is fused";
  c10::InferenceMode guard;
  const at::Tensor x = at::randn({2, 16, 23, 30});
  EXPECT_LE(max_error(rewritten.forward({x}).toTensor(), reference.forward({x}).toTensor()), 1e-4);
}

}  // namespace
}  // namespace corepool
