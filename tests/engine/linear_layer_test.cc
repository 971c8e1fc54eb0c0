// Linear layers on prepacked weights: oneDNN's inner product
// (worker/kernels/onednn_linear.h), corepool's own kernel (worker/kernels/packed_linear.h)
// and the graph pass choosing between them (worker/optimize/linear_rewrite.h),
// checked against references written here: a naive double-precision
// y = x W^T + b, and the frozen module before the rewrite.
// The whole-model checks (both modes equal the module as loaded within 1e-5)
// are in optimize_test.cc; the packed weights' sharing in pool_memory_test.cc.
#include <ATen/Parallel.h>
#include <torch/csrc/jit/passes/freeze_module.h>

#include <gtest/gtest.h>

#include "tests/engine/graph_nodes.h"
#include "worker/optimize/linear_rewrite.h"
#include "worker/kernels/onednn_linear.h"
#include "worker/kernels/packed_gemm.h"
#include "worker/kernels/packed_linear.h"

namespace corepool {
namespace {

// y[r][o] = b[o] + sum over i of x[r][i] * w[o][i], in doubles; ReLU on request.
at::Tensor naive_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, bool relu) {
  const at::Tensor x64 = x.to(at::kDouble), w64 = w.to(at::kDouble), b64 = b.to(at::kDouble);
  at::Tensor y = at::zeros({x.size(0), w.size(0)}, at::kDouble);
  auto X = x64.accessor<double, 2>();
  auto W = w64.accessor<double, 2>();
  auto B = b64.accessor<double, 1>();
  auto Y = y.accessor<double, 2>();
  for (int64_t r = 0; r < x.size(0); ++r)
    for (int64_t o = 0; o < w.size(0); ++o) {
      double sum = B[o];
      for (int64_t i = 0; i < w.size(1); ++i) sum += X[r][i] * W[o][i];
      Y[r][o] = relu && sum < 0 ? 0 : sum;
    }
  return y.to(at::kFloat);
}

double max_difference(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// Both layer classes pass the same tests; the packed one only where its
// kernel runs (elsewhere the graph pass never makes it).
template <typename Layer>
class LinearLayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::is_same_v<Layer, PackedLinear> && !packed_gemm_available()) {
      GTEST_SKIP() << "this CPU has no AVX2 + FMA: corepool's packed kernel is not used here";
    }
  }
};
using LayerClasses = ::testing::Types<OnednnLinear, PackedLinear>;
TYPED_TEST_SUITE(LinearLayerTest, LayerClasses);

TYPED_TEST(LinearLayerTest, EqualsANaiveLinearLayerForEveryShapeRowCountAndReLU) {
  at::manual_seed(20261126);
  c10::InferenceMode guard;
  // Around the packed kernel's edges: 16-column panels (37, 300: a partial
  // last one), 6-row panels, k chunks of 256 (512, 700).
  for (auto [out, in] : {std::pair<int64_t, int64_t>{37, 5}, {4, 512}, {300, 64}, {16, 700}}) {
    const at::Tensor w = at::randn({out, in}) * 0.1, b = at::randn({out});
    for (bool relu : {false, true}) {
      TypeParam layer(w, b, relu);
      for (int64_t rows : {1, 3, 6, 8, 17}) {
        const at::Tensor x = at::randn({rows, in});
        const at::Tensor got = layer.run(x);
        ASSERT_EQ(got.sizes(), (std::vector<int64_t>{rows, out}));
        EXPECT_LE(max_difference(got, naive_linear(x, w, b, relu)), 1e-5)
            << out << "x" << in << " rows " << rows << " relu " << relu;
      }
    }
  }
}

TYPED_TEST(LinearLayerTest, NoBiasMeansZeroBiasAndLeadingDimensionsAreKept) {
  at::manual_seed(7);
  c10::InferenceMode guard;
  const at::Tensor w = at::randn({6, 10});
  TypeParam layer(w, c10::nullopt, false);
  const at::Tensor x = at::randn({2, 3, 10});
  const at::Tensor got = layer.run(x);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{2, 3, 6}));
  EXPECT_LE(max_difference(got.reshape({6, 6}), naive_linear(x.reshape({6, 10}), w, at::zeros({6}), false)), 1e-5);
  // A transposed (non-contiguous) input is read as the values it holds.
  const at::Tensor xt = at::randn({10, 4}).t();
  EXPECT_LE(max_difference(layer.run(xt), naive_linear(xt.contiguous(), w, at::zeros({6}), false)), 1e-5);
  EXPECT_EQ(layer.run(at::randn({0, 10})).sizes(), (std::vector<int64_t>{0, 6})) << "no rows";
}

// PackedLinear splits its output panels between LibTorch's intra-op threads:
// 5000 outputs of 64 inputs are 313 panels, two tasks.
TEST(PackedLinearTest, ThreadsSplittingTheOutputsComputeTheSame) {
  if (!packed_gemm_available()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: corepool's packed kernel is not used here";
  at::manual_seed(11);
  c10::InferenceMode guard;
  const at::Tensor w = at::randn({5000, 64}) * 0.1, b = at::randn({5000}), x = at::randn({5, 64});
  const PackedLinear layer(w, b, true);
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  const at::Tensor got = layer.run(x);
  at::set_num_threads(before);
  EXPECT_LE(max_difference(got, naive_linear(x, w, b, true)), 1e-5);
}

TYPED_TEST(LinearLayerTest, BadWeightsOrInputAreAnErrorNotACrash) {
  EXPECT_THROW(TypeParam(at::randn({3, 4, 5}), c10::nullopt, false), c10::Error) << "3-D weights";
  EXPECT_THROW(TypeParam(at::randn({3, 4}).to(at::kDouble), c10::nullopt, false), c10::Error) << "fp64 weights";
  EXPECT_THROW(TypeParam(at::randn({3, 4}), at::randn({5}), false), c10::Error) << "bias of the wrong size";
  TypeParam layer(at::randn({3, 4}), c10::nullopt, false);
  try {
    layer.run(at::randn({2, 5}));
    FAIL() << "5 input features against 4 in the weights";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("[..., 4]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(layer.run(at::randn({2, 4}).to(at::kDouble)), c10::Error) << "fp64 input";
}

// Eligible: h (addmm of a transposed weight, ReLU fused), l (linear, its output
// used twice so no ReLU fused), n (linear without a bias). Not: s (addmm with
// beta 2), p (a weight that is an input, not a constant).
torch::jit::Module mixed_module() {
  torch::jit::Module m("MixedLinear");
  m.register_parameter("h_w", at::randn({48, 20}) * 0.2, false);
  m.register_parameter("h_b", at::randn({48}) * 0.1, false);
  m.register_parameter("l_w", at::randn({24, 48}) * 0.2, false);
  m.register_parameter("l_b", at::randn({24}) * 0.1, false);
  m.register_parameter("n_w", at::randn({16, 24}) * 0.2, false);
  m.register_parameter("s_w", at::randn({16, 16}) * 0.2, false);
  m.register_parameter("s_b", at::randn({16}) * 0.1, false);
  m.define(R"(
def forward(self, x, p):
    x = torch.relu(torch.addmm(self.h_b, x, self.h_w.t()))
    y = torch.linear(x, self.l_w, self.l_b)
    x = torch.relu(y) + y
    x = torch.linear(x, self.n_w)
    x = torch.addmm(self.s_b, x, self.s_w.t(), beta=2)
    return torch.mm(x, p)
)");
  m.eval();
  return m;
}

using testing::count_nodes;

TEST(LinearRewriteTest, OnlyEligibleLayersAreRewrittenAndTheModuleStillComputesTheSame) {
  at::manual_seed(20261126);
  torch::jit::Module loaded = mixed_module();
  torch::jit::Module reference = torch::jit::freeze(loaded.clone());
  torch::jit::Module rewritten = torch::jit::freeze(loaded.clone());
  EXPECT_EQ(rewrite_linear(rewritten).total(), 3);
  // Which kernel takes them depends on the CPU (linear_rewrite.cc): oneDNN's
  // brgemm where it has one, else corepool's packed kernel on AVX2 + FMA.
  const bool brgemm = OnednnLinear::kernel_for(48, 20, true).rfind("brgemm", 0) == 0;
  const bool packed = !brgemm && packed_gemm_available();
  EXPECT_EQ(count_nodes(rewritten, "corepool::onednn_linear"), packed ? 0 : 3)
      << OnednnLinear::kernel_for(48, 20, true);
  EXPECT_EQ(count_nodes(rewritten, "corepool::packed_linear"), packed ? 3 : 0);
  EXPECT_EQ(count_nodes(rewritten, "aten::addmm"), 1) << "beta 2 stays";
  EXPECT_EQ(count_nodes(rewritten, "aten::mm"), 1) << "a weight that is an input stays";
  EXPECT_EQ(count_nodes(rewritten, "aten::relu"), 1) << "l's ReLU is not fused: its output has two uses";
  c10::InferenceMode guard;
  const at::Tensor p = at::randn({16, 5});
  for (int64_t rows : {1, 6}) {
    const at::Tensor x = at::randn({rows, 20});
    const at::Tensor want = reference.forward({x, p}).toTensor();
    const at::Tensor got = rewritten.forward({x, p}).toTensor();
    ASSERT_EQ(got.sizes(), want.sizes());
    EXPECT_LE(max_difference(got, want), 1e-5) << rows;
  }
}

}  // namespace
}  // namespace corepool
