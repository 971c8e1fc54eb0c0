// Every kernel path of engine.kernels (worker/kernels/kernel_path.h) that this
// CPU runs, against LibTorch's own conv2d and linear (the frozen module
// before the rewrite) on shapes off the kernels' grids: channels that are not
// multiples of 8 or 16, batch 1 and 3, padding 0 and 2, stride 2, dilation 2,
// groups 2, 1x1, a large map, a layer fused with its pool and one not. A path
// this CPU cannot run is skipped with the reason; what a path refuses stays
// LibTorch's on every CPU. Last, CNN10 and the default tagger must come out
// of the optimizer rewritten here: a rewrite off by more than the
// optimizer's tolerance makes it fall back to the module as loaded, and that
// must fail a test, not pass unseen.
#include <cmath>
#include <ostream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <torch/csrc/jit/passes/freeze_module.h>

#include <gtest/gtest.h>

#include "tests/engine/graph_nodes.h"
#include "worker/kernels/kernel_path.h"
#include "worker/kernels/winograd_conv.h"
#include "worker/model/model.h"
#include "worker/optimize/linear_rewrite.h"
#include "worker/optimize/optimize.h"
#include "worker/optimize/winograd_rewrite.h"

namespace corepool {

// gtest names the parameters of a failing case with this (found by ADL).
static void PrintTo(KernelPath path, std::ostream* os) { *os << kernel_path_name(path); }

namespace {

// One convolution (its ReLU, its pool) in a module of its own.
struct ConvCase {
  const char* name;
  int64_t in, out, kernel, stride, padding, dilation, groups, height, width;
  bool bias, relu;
  const char* pool;  // "" (none), "avg2" (fusable 2x2 average), "avg3" (3x3 stride 1: not fusable)
  bool own;          // corepool's Winograd takes it (3x3, stride 1, padding 1, one group, >= 16 inputs)
  bool onednn;       // oneDNN's Winograd takes it (... and channels in multiples of 16)
};

// The expectations come from the paths' documented limits, not from the code under test.
const std::vector<ConvCase> kConvCases = {
    {"odd channels 17 -> 19, ReLU", 17, 19, 3, 1, 1, 1, 1, 9, 13, true, true, "", true, false},
    {"channels 24 -> 40 (multiples of 8, not 16)", 24, 40, 3, 1, 1, 1, 1, 11, 7, true, false, "", true, false},
    {"33 -> 5 without bias", 33, 5, 3, 1, 1, 1, 1, 6, 5, false, true, "", true, false},
    {"16 -> 32, no pool", 16, 32, 3, 1, 1, 1, 1, 8, 12, true, true, "", true, true},
    {"32 -> 48 fused with its 2x2 pool", 32, 48, 3, 1, 1, 1, 1, 13, 10, true, true, "avg2", true, true},
    {"16 -> 16 with a 3x3 pool (not fusable)", 16, 16, 3, 1, 1, 1, 1, 9, 9, true, true, "avg3", true, true},
    {"large map 16 -> 16, 128 x 96", 16, 16, 3, 1, 1, 1, 1, 128, 96, true, true, "", true, true},
    {"padding 0", 16, 16, 3, 1, 0, 1, 1, 10, 10, true, false, "", false, false},
    {"padding 2", 16, 16, 3, 1, 2, 1, 1, 10, 10, true, false, "", false, false},
    {"stride 2", 16, 32, 3, 2, 1, 1, 1, 11, 12, true, true, "", false, false},
    {"dilation 2", 16, 16, 3, 1, 2, 2, 1, 12, 9, true, false, "", false, false},
    {"groups 2", 32, 32, 3, 1, 1, 1, 2, 8, 8, true, true, "", false, false},
    {"1x1", 32, 48, 1, 1, 0, 1, 1, 7, 9, true, true, "", false, false},
    {"5x5", 16, 16, 5, 1, 2, 1, 1, 8, 8, true, false, "", false, false},
    {"one input channel (too few to pay)", 1, 16, 3, 1, 1, 1, 1, 12, 12, true, true, "", false, false},
};

std::string list(int64_t a, int64_t b) { return "[" + std::to_string(a) + ", " + std::to_string(b) + "]"; }

torch::jit::Module conv_module(const ConvCase& c) {
  torch::jit::Module m("Conv");
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.in / c.groups * c.kernel * c.kernel));
  m.register_parameter("w", at::randn({c.out, c.in / c.groups, c.kernel, c.kernel}) * scale, false);
  m.register_parameter("b", at::randn({c.out}), false);
  std::string body = "    x = torch.conv2d(x, self.w, " + std::string(c.bias ? "self.b" : "None") + ", " +
                     list(c.stride, c.stride) + ", " + list(c.padding, c.padding) + ", " +
                     list(c.dilation, c.dilation) + ", " + std::to_string(c.groups) + ")\n";
  if (c.relu) body += "    x = torch.relu(x)\n";
  if (std::string(c.pool) == "avg2") body += "    x = torch.avg_pool2d(x, [2, 2])\n";
  if (std::string(c.pool) == "avg3") body += "    x = torch.avg_pool2d(x, [3, 3], [1, 1])\n";
  m.define("def forward(self, x):\n" + body + "    return x\n");
  m.eval();
  return m;
}

double max_error(const at::Tensor& got, const at::Tensor& want) { return (got - want).abs().max().item<double>(); }

at::Tensor forward(torch::jit::Module& m, const at::Tensor& x) {
  c10::InferenceMode guard;
  return m.forward({x}).toTensor();
}

// The three paths that replace LibTorch's layers; the test is named by each.
class KernelPathTest : public ::testing::TestWithParam<KernelPath> {
 protected:
  void SetUp() override {
    const std::string why = kernel_path_unavailable(GetParam());
    if (!why.empty()) {
      GTEST_SKIP() << "engine.kernels = " << kernel_path_name(GetParam()) << " cannot run here: " << why;
    }
  }
  bool takes(const ConvCase& c) const { return GetParam() == KernelPath::kOnednn ? c.onednn : c.own; }
};

TEST_P(KernelPathTest, EveryConvolutionItTakesEqualsTorchsConv2dAndTheRestStayTorchs) {
  at::manual_seed(20261129);
  for (const ConvCase& c : kConvCases) {
    SCOPED_TRACE(c.name);
    torch::jit::Module m = conv_module(c);
    torch::jit::Module reference = torch::jit::freeze(m.clone());
    torch::jit::Module rewritten = torch::jit::freeze(m.clone());
    const WinogradRewrite done = rewrite_winograd(rewritten, GetParam());
    const bool onednn = GetParam() == KernelPath::kOnednn;
    EXPECT_EQ(done.winograd, onednn && c.onednn ? 1 : 0);
    EXPECT_EQ(done.own, !onednn && c.own ? 1 : 0);
    EXPECT_EQ(done.own_portable, GetParam() == KernelPath::kPortable && c.own ? 1 : 0) << "the path asked for runs";
    EXPECT_EQ(testing::count_nodes(rewritten, "aten::conv2d"), takes(c) ? 0 : 1);
    if (!onednn && c.own) {
      EXPECT_EQ(done.own_pooled, std::string(c.pool) == "avg2" ? 1 : 0);
    }
    for (int64_t n : {1, 3}) {
      const at::Tensor x = at::randn({n, c.in, c.height, c.width});
      const at::Tensor want = forward(reference, x);
      const at::Tensor got = forward(rewritten, x);
      ASSERT_EQ(got.sizes(), want.sizes()) << "batch " << n;
      EXPECT_LE(max_error(got, want), 1e-4) << "batch " << n;
    }
  }
}

// A chain as a network starts: one input channel, then 16. oneDNN runs the
// first directly into its blocked layout and the second as Winograd;
// corepool's Winograd leaves the first to LibTorch (too few channels).
TEST_P(KernelPathTest, AChainFromOneChannelEqualsTorchsConvolutions) {
  at::manual_seed(20261129);
  torch::jit::Module m("Chain");
  m.register_parameter("a", at::randn({16, 1, 3, 3}) * 0.3, false);
  m.register_parameter("b", at::randn({16, 16, 3, 3}) * 0.08, false);
  m.define(R"(
def forward(self, x):
    x = torch.relu(torch.conv2d(x, self.a, None, [1, 1], [1, 1]))
    x = torch.max_pool2d(x, [2, 2])
    return torch.relu(torch.conv2d(x, self.b, None, [1, 1], [1, 1]))
)");
  m.eval();
  torch::jit::Module reference = torch::jit::freeze(m.clone());
  torch::jit::Module rewritten = torch::jit::freeze(m.clone());
  const WinogradRewrite done = rewrite_winograd(rewritten, GetParam());
  if (GetParam() == KernelPath::kOnednn) {
    EXPECT_EQ(done.winograd, 1);
    EXPECT_EQ(done.direct, plain_input_available(1, 16) ? 1 : 0);
  } else {
    EXPECT_EQ(done.own, 1);
  }
  for (int64_t n : {1, 3}) {
    const at::Tensor x = at::randn({n, 1, 21, 18});
    EXPECT_LE(max_error(forward(rewritten, x), forward(reference, x)), 1e-4) << "batch " << n;
  }
}

// Linear layers whose sizes fill no panel (16 or 8 columns) or vector, with
// and without ReLU and bias, on 1 and 3 rows and a 3-d input.
TEST_P(KernelPathTest, EveryLinearLayerEqualsTorchsLinear) {
  at::manual_seed(20261129);
  torch::jit::Module m("Linears");
  m.register_parameter("w1", at::randn({19, 37}) * 0.2, false);
  m.register_parameter("b1", at::randn({19}), false);
  m.register_parameter("w2", at::randn({8, 19}) * 0.2, false);
  m.register_parameter("w3", at::randn({3, 8}) * 0.3, false);
  m.register_parameter("b3", at::randn({3}), false);
  m.define(R"(
def forward(self, x):
    x = torch.relu(torch.linear(x, self.w1, self.b1))
    x = torch.linear(x, self.w2, None)
    return torch.linear(x, self.w3, self.b3)
)");
  m.eval();
  torch::jit::Module reference = torch::jit::freeze(m.clone());
  torch::jit::Module rewritten = torch::jit::freeze(m.clone());
  const LinearRewrite done = rewrite_linear(rewritten, GetParam());
  if (GetParam() == KernelPath::kCorepool) {
    EXPECT_EQ(done.packed, 3);
    EXPECT_EQ(testing::count_nodes(rewritten, "corepool::packed_linear"), 3);
  } else {  // onednn, portable: oneDNN's inner product (jitted on every x86-64 with SSE4.1)
    EXPECT_EQ(done.onednn, 3);
    EXPECT_EQ(testing::count_nodes(rewritten, "corepool::onednn_linear"), 3);
  }
  EXPECT_EQ(testing::count_nodes(rewritten, "aten::relu"), 0) << "the ReLU is fused";
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{1, 37}, {3, 37}, {3, 5, 37}}) {
    const at::Tensor x = at::randn(shape);
    EXPECT_LE(max_error(forward(rewritten, x), forward(reference, x)), 1e-5) << x.sizes();
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, KernelPathTest,
                         ::testing::Values(KernelPath::kOnednn, KernelPath::kCorepool, KernelPath::kPortable),
                         [](const auto& info) { return std::string(kernel_path_name(info.param)); });

// What no path computes (stride 2, groups 2, dilation 2, padding other than 1,
// 1x1, 5x5) stays LibTorch's on every path, whatever this CPU runs: the graph
// pass refuses it before any kernel is made, so this runs on every CPU. And
// `torch` rewrites nothing at all.
TEST(KernelPathRefusalTest, WhatNoPathComputesIsLeftToTorchOnEveryPathAndEveryCpu) {
  at::manual_seed(20261129);
  for (const std::string& name : kernel_path_names()) {
    const KernelPath path = *parse_kernel_path(name);
    for (const ConvCase& c : kConvCases) {
      if (path != KernelPath::kTorch && (c.own || c.onednn)) continue;
      SCOPED_TRACE(name + ": " + c.name);
      torch::jit::Module rewritten = torch::jit::freeze(conv_module(c));
      const WinogradRewrite done = rewrite_winograd(rewritten, path);
      EXPECT_EQ(done.winograd + done.direct + done.own, 0);
      EXPECT_EQ(testing::count_nodes(rewritten, "aten::conv2d"), 1);
    }
  }
}

TEST(KernelPathRefusalTest, AnUnknownPathIsAnErrorNamingTheKeyAndTheChoices) {
  EXPECT_FALSE(parse_kernel_path("avx2").has_value());
  const auto model = load_model(COREPOOL_DEFAULT_MODEL);
  try {
    optimize_model(*model, "onednn", false, {}, "avx2");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("engine.kernels"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("auto, onednn, corepool, portable, torch"), std::string::npos) << e.what();
  }
}

// The optimizer on a real model, on every path this CPU runs (auto first):
// no fallback (a rewrite off by more than 1e-5 would fall back, with a WARN,
// to the module as loaded), and the layers it names rewritten.
struct ModelCase {
  const char* name;
  const char* dir;
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.name; }

class OptimizedModelTest : public ::testing::TestWithParam<std::tuple<ModelCase, KernelPath>> {};

TEST_P(OptimizedModelTest, TheModelRunsRewrittenOnThisCpuWithoutAFallback) {
  const auto& [model_case, path] = GetParam();
  const std::string why = kernel_path_unavailable(path);
  if (!why.empty()) GTEST_SKIP() << "engine.kernels = " << kernel_path_name(path) << " cannot run here: " << why;
  const auto model = load_model(model_case.dir);
  const OptimizeOutcome o = optimize_model(*model, "onednn", false, {}, kernel_path_name(path));
  EXPECT_EQ(o.applied, "onednn") << o.fallback;
  EXPECT_EQ(o.fallback, "");
  EXPECT_EQ(o.winograd_fallback, "") << "fell back to LibTorch's layers";
  EXPECT_LE(o.max_difference, 1e-5);
  EXPECT_GT(o.winograd_layers + o.own_winograd_layers, 0) << "no convolution rewritten";
  EXPECT_GT(o.linear_layers, 0) << "no linear layer rewritten";
  EXPECT_NE(o.kernels, "torch");
  if (path != KernelPath::kAuto) {
    EXPECT_EQ(o.kernels, kernel_path_name(path));
  }
  if (path == KernelPath::kOnednn) {
    EXPECT_EQ(o.own_winograd_layers, 0);
  } else if (path != KernelPath::kAuto) {
    EXPECT_EQ(o.winograd_layers, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, OptimizedModelTest,
    ::testing::Combine(::testing::Values(ModelCase{"cnn10", COREPOOL_CNN10_MODEL},
                                         ModelCase{"default", COREPOOL_DEFAULT_MODEL}),
                       ::testing::Values(KernelPath::kAuto, KernelPath::kOnednn, KernelPath::kCorepool,
                                         KernelPath::kPortable)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param).name) + "_" + kernel_path_name(std::get<1>(info.param));
    });

}  // namespace
}  // namespace corepool
