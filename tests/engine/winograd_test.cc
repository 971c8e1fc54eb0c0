// The Winograd path of engine.optimize = "onednn" (worker/kernels/winograd_conv.h,
// worker/optimize/winograd_rewrite.h), checked against references written here: a naive
// six-loop convolution, the blocked layout's index formula, and the frozen
// module before the rewrite. The whole-model checks (thread and process mode
// equal the module as loaded within 1e-5) are in optimize_test.cc.
#include <torch/csrc/jit/passes/freeze_module.h>

#include <gtest/gtest.h>

#include "tests/engine/graph_nodes.h"
#include "tests/engine/naive_conv.h"
#include "worker/kernels/winograd_calibrate.h"
#include "worker/kernels/winograd_conv.h"
#include "worker/optimize/winograd_rewrite.h"

namespace corepool {
namespace {

bool have_winograd() { return winograd_available(16, 32); }

TEST(WinogradTest, BlockedLayoutPutsChannelCOfItemNAtBlockCOver16LaneCMod16) {
  const at::Tensor x = at::randn({2, 32, 3, 5});
  const at::Tensor b = to_blocked(x);
  ASSERT_EQ(b.sizes(), (std::vector<int64_t>{2, 2, 3, 5, 16}));
  auto X = x.accessor<float, 4>();
  auto B = b.accessor<float, 5>();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 32; ++c)
      for (int64_t y = 0; y < 3; ++y)
        for (int64_t w = 0; w < 5; ++w) ASSERT_EQ(B[n][c / 16][y][w][c % 16], X[n][c][y][w]);
  EXPECT_TRUE(at::equal(from_blocked(b), x));
  EXPECT_THROW(to_blocked(at::randn({1, 8, 3, 3})), c10::Error) << "8 channels do not fill a block";
}

TEST(WinogradTest, PoolingABlockedTensorEqualsPoolingItsChannelsOneByOne) {
  const at::Tensor x = at::randn({3, 32, 9, 12});
  const at::Tensor avg = from_blocked(pool_blocked(to_blocked(x), [](const at::Tensor& v) {
    return at::avg_pool2d(v, {2, 2});
  }));
  const at::Tensor max = from_blocked(pool_blocked(to_blocked(x), [](const at::Tensor& v) {
    return at::max_pool2d(v, {3, 3}, {2, 2}, {1, 1});
  }));
  for (int64_t c = 0; c < 32; c += 7) {
    const at::Tensor one = x.slice(1, c, c + 1);
    EXPECT_TRUE(at::allclose(avg.slice(1, c, c + 1), at::avg_pool2d(one, {2, 2}))) << c;
    EXPECT_TRUE(at::equal(max.slice(1, c, c + 1), at::max_pool2d(one, {3, 3}, {2, 2}, {1, 1}))) << c;
  }
}

TEST(WinogradTest, NoKernelForChannelsThatDoNotFillBlocks) {
  EXPECT_FALSE(winograd_available(8, 16));
  EXPECT_FALSE(winograd_available(16, 24));
}

// Batches of 1..33 items cross the chunk size (kDefaultChunk) and the layouts oneDNN picks per chunk size; odd spatial sizes
// leave partial 4x4 tiles at the edges.
TEST(WinogradTest, ConvolutionEqualsANaiveConvolutionForEveryBatchSize) {
  if (!have_winograd()) GTEST_SKIP() << "oneDNN has no Winograd kernel for this CPU (AVX-512 needed)";
  const at::Tensor w = at::randn({32, 16, 3, 3}) * 0.2;
  const at::Tensor bias = at::randn({32});
  for (bool relu : {false, true}) {
    auto conv = c10::make_intrusive<WinogradConv>(w, bias, relu);
    for (int64_t n : {1, 2, 3, 5, 8, 11, 17, 33}) {
      const at::Tensor x = at::randn({n, 16, 7, 13});
      const at::Tensor got = from_blocked(conv->run(to_blocked(x)));
      const at::Tensor want = naive_conv3x3(x, w, bias, relu);
      EXPECT_LE((got - want).abs().max().item<double>(), 1e-4) << "batch " << n << " relu " << relu;
    }
  }
}

// Every chunk size gives the naive convolution's result, and sizes outside
// 1..kMaxChunk are refused.
TEST(WinogradTest, EveryChunkSizeComputesTheSameConvolution) {
  if (!have_winograd()) GTEST_SKIP() << "oneDNN has no Winograd kernel for this CPU";
  const at::Tensor w = at::randn({32, 16, 3, 3}) * 0.2;
  const at::Tensor bias = at::randn({32});
  auto conv = c10::make_intrusive<WinogradConv>(w, bias, true);
  const at::Tensor x = at::randn({11, 16, 9, 10});
  const at::Tensor want = naive_conv3x3(x, w, bias, true);
  for (int64_t chunk = 1; chunk <= WinogradConv::kMaxChunk; ++chunk) {
    conv->set_chunk(chunk);
    ASSERT_EQ(conv->chunk(), chunk);
    EXPECT_LE((from_blocked(conv->run(to_blocked(x))) - want).abs().max().item<double>(), 1e-4) << chunk;
  }
  EXPECT_THROW(conv->set_chunk(0), c10::Error);
  EXPECT_THROW(conv->set_chunk(WinogradConv::kMaxChunk + 1), c10::Error);
}

// The first layer's variant: plain NCHW input with channels that fill no
// block (1 and 3), oneDNN's direct kernel, blocked output.
TEST(WinogradTest, AConvolutionFromPlainInputEqualsANaiveConvolution) {
  if (!plain_input_available(1, 32)) GTEST_SKIP() << "oneDNN has no jitted kernel from plain input on this CPU";
  EXPECT_FALSE(plain_input_available(16, 32)) << "16 channels fill a block: Winograd's case";
  EXPECT_FALSE(plain_input_available(1, 8)) << "8 output channels fill no block";
  for (int64_t channels : {1, 3}) {
    const at::Tensor w = at::randn({32, channels, 3, 3}) * 0.3;
    const at::Tensor bias = at::randn({32});
    auto conv = c10::make_intrusive<WinogradConv>(w, bias, true, /*plain_input=*/true);
    conv->set_chunk(2);
    for (int64_t n : {1, 5}) {
      const at::Tensor x = at::randn({n, channels, 11, 17});
      const at::Tensor got = from_blocked(conv->run(x));
      EXPECT_LE((got - naive_conv3x3(x, w, bias, true)).abs().max().item<double>(), 1e-4) << channels << " " << n;
    }
    EXPECT_THROW(conv->run(to_blocked(at::randn({1, 16, 5, 5}))), c10::Error) << "blocked input";
  }
}

TEST(WinogradTest, AnInputOfTheWrongShapeIsAnErrorNotACrash) {
  if (!have_winograd()) GTEST_SKIP() << "oneDNN has no Winograd kernel for this CPU";
  auto conv = c10::make_intrusive<WinogradConv>(at::randn({32, 16, 3, 3}), c10::nullopt, false);
  EXPECT_THROW(conv->run(at::randn({1, 16, 5, 5})), c10::Error) << "not blocked";
  EXPECT_THROW(conv->run(to_blocked(at::randn({1, 32, 5, 5}))), c10::Error) << "32 channels, weights want 16";
  EXPECT_THROW(WinogradConv(at::randn({32, 16, 5, 5}), c10::nullopt, false), c10::Error) << "5x5 weights";
}

// Eligible: a (16->32, ReLU fused), c (32->32, its output used twice so no ReLU
// is fused). Not: s (stride 2), g (two groups), n (8 output channels).
torch::jit::Module mixed_module() {
  torch::jit::Module m("Mixed");
  auto add = [&](const std::string& name, int64_t out, int64_t in) {
    m.register_parameter(name + "_w", at::randn({out, in, 3, 3}) * 0.1, false);
    m.register_parameter(name + "_b", at::randn({out}) * 0.1, false);
  };
  add("a", 32, 16);
  add("c", 32, 32);
  add("s", 32, 32);
  add("g", 32, 16);
  add("n", 8, 32);
  m.define(R"(
def forward(self, x):
    x = torch.relu(torch.conv2d(x, self.a_w, self.a_b, [1, 1], [1, 1]))
    x = torch.avg_pool2d(x, [2, 2])
    y = torch.conv2d(x, self.c_w, self.c_b, [1, 1], [1, 1])
    x = torch.relu(y) + y
    x = torch.max_pool2d(x, [2, 2])
    x = torch.conv2d(x, self.s_w, self.s_b, [2, 2], [1, 1])
    x = torch.conv2d(x, self.g_w, self.g_b, [1, 1], [1, 1], [1, 1], 2)
    x = torch.conv2d(x, self.n_w, self.n_b, [1, 1], [1, 1])
    return x
)");
  m.eval();
  return m;
}

using testing::count_nodes;

TEST(WinogradRewriteTest, OnlyEligibleConvolutionsAreRewrittenAndTheModuleStillComputesTheSame) {
  if (!have_winograd()) GTEST_SKIP() << "oneDNN has no Winograd kernel for this CPU";
  at::manual_seed(20261126);
  torch::jit::Module loaded = mixed_module();
  torch::jit::Module reference = torch::jit::freeze(loaded.clone());
  torch::jit::Module rewritten = torch::jit::freeze(loaded.clone());
  EXPECT_EQ(rewrite_winograd(rewritten).winograd, 2);
  EXPECT_EQ(count_nodes(rewritten, "corepool::winograd_conv3x3"), 2);
  EXPECT_EQ(count_nodes(rewritten, "aten::conv2d"), 3) << "stride 2, two groups and 8 channels stay";
  EXPECT_EQ(count_nodes(rewritten, "corepool::avg_pool2d_blocked"), 1) << "the pool between a and c stays blocked";
  EXPECT_EQ(count_nodes(rewritten, "aten::relu"), 1) << "c's ReLU is not fused: its output has two uses";
  EXPECT_EQ(count_nodes(rewritten, "corepool::to_blocked"), 1) << "one conversion in, none between a and c";
  c10::InferenceMode guard;
  for (int64_t n : {1, 3}) {
    const at::Tensor x = at::randn({n, 16, 20, 28});
    const at::Tensor want = reference.forward({x}).toTensor();
    const at::Tensor got = rewritten.forward({x}).toTensor();
    ASSERT_EQ(got.sizes(), want.sizes());
    EXPECT_LE((got - want).abs().max().item<double>(), 1e-5) << n;
  }
}

// The calibration finds both layers, sets each to a size it tried (powers of
// two up to the batch), and the module computes the same afterwards.
TEST(WinogradRewriteTest, CalibrationGivesEachLayerAChunkItTriedAndKeepsTheResult) {
  if (!have_winograd()) GTEST_SKIP() << "oneDNN has no Winograd kernel for this CPU";
  at::manual_seed(20261126);
  torch::jit::Module loaded = mixed_module();
  torch::jit::Module reference = torch::jit::freeze(loaded.clone());
  torch::jit::Module rewritten = torch::jit::freeze(loaded.clone());
  ASSERT_EQ(rewrite_winograd(rewritten).winograd, 2);
  const auto layers = winograd_layers_of(rewritten);
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0]->in_channels(), 16) << "graph order: a first";
  EXPECT_EQ(layers[1]->in_channels(), 32);
  const std::vector<int64_t> chunks = calibrate_winograd_chunks(rewritten, layers, at::randn({4, 16, 20, 28}));
  ASSERT_EQ(chunks.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(chunks[i] == 1 || chunks[i] == 2 || chunks[i] == 4) << chunks[i];
    EXPECT_EQ(layers[i]->chunk(), chunks[i]);
  }
  c10::InferenceMode guard;
  const at::Tensor x = at::randn({5, 16, 20, 28});
  // Winograd's transforms round differently from a direct convolution: on
  // these unnormalised random layers (outputs near 10) 1e-4 is a few ulps.
  EXPECT_LE((rewritten.forward({x}).toTensor() - reference.forward({x}).toTensor()).abs().max().item<double>(), 1e-4);
}

// A first layer from one channel starts the chain directly in the blocked
// layout (no conversion before the Winograd layer after it); alone, without a
// Winograd layer to feed, it is left as it is.
TEST(WinogradRewriteTest, AFirstLayerFromOneChannelRunsDirectIntoTheChain) {
  if (!have_winograd() || !plain_input_available(1, 16)) GTEST_SKIP() << "no such kernels on this CPU";
  at::manual_seed(20261126);
  torch::jit::Module m("FirstLayer");
  m.register_parameter("a_w", at::randn({16, 1, 3, 3}) * 0.3, false);
  m.register_parameter("b_w", at::randn({32, 16, 3, 3}) * 0.1, false);
  m.define(R"(
def forward(self, x):
    x = torch.relu(torch.conv2d(x, self.a_w, None, [1, 1], [1, 1]))
    return torch.relu(torch.conv2d(x, self.b_w, None, [1, 1], [1, 1]))
)");
  m.eval();
  torch::jit::Module reference = torch::jit::freeze(m.clone());
  torch::jit::Module rewritten = torch::jit::freeze(m.clone());
  const WinogradRewrite done = rewrite_winograd(rewritten);
  EXPECT_EQ(done.winograd, 1);
  EXPECT_EQ(done.direct, 1);
  EXPECT_EQ(count_nodes(rewritten, "corepool::to_blocked"), 0) << "the chain starts blocked";
  EXPECT_EQ(count_nodes(rewritten, "aten::conv2d"), 0);
  c10::InferenceMode guard;
  const at::Tensor x = at::randn({3, 1, 13, 21});
  EXPECT_LE((rewritten.forward({x}).toTensor() - reference.forward({x}).toTensor()).abs().max().item<double>(), 1e-5);

  torch::jit::Module alone("Alone");
  alone.register_parameter("a_w", at::randn({16, 1, 3, 3}), false);
  alone.define("def forward(self, x):\n    return torch.conv2d(x, self.a_w, None, [1, 1], [1, 1])\n");
  alone.eval();
  torch::jit::Module frozen = torch::jit::freeze(alone);
  EXPECT_EQ(rewrite_winograd(frozen).direct, 0);
}

TEST(WinogradRewriteTest, AModuleWithoutEligibleConvolutionsIsLeftAsItIs) {
  torch::jit::Module m("Small");
  m.register_parameter("w", at::randn({8, 1, 3, 3}), false);
  m.define("def forward(self, x):\n    return torch.relu(torch.conv2d(x, self.w, None, [1, 1], [1, 1]))\n");
  m.eval();
  torch::jit::Module frozen = torch::jit::freeze(m);
  const std::string before = frozen.get_method("forward").graph()->toString();
  const WinogradRewrite done = rewrite_winograd(frozen);
  EXPECT_EQ(done.winograd + done.direct + done.own, 0);
  EXPECT_EQ(frozen.get_method("forward").graph()->toString(), before);
}

}  // namespace
}  // namespace corepool
