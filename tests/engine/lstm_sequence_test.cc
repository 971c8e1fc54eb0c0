// corepool::lstm (worker/kernels/lstm_sequence.h) against two references
// computed independently of oneDNN's LSTM: ATen's own at::lstm and a loop of
// at::lstm_cell, one step at a time. Sequence lengths from 1 to 256, batches
// of 1 and 3, input sizes that are and are not multiples of a vector, two
// hidden sizes, nonzero initial states; the op through TorchScript; the
// per-thread caches (one weight set at several lengths, another weight set
// of the same shape, new weights at freed ones' addresses, primitives
// evicted and made again); bad arguments. Prints the time per step against
// at::lstm.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/api/compilation_unit.h>

#include <gtest/gtest.h>

#include "worker/kernels/lstm_sequence.h"
#include "worker/model/ops_resolver.h"

namespace corepool {
namespace {

struct Weights {
  at::Tensor w_ih, w_hh, b_ih, b_hh;
};

// PyTorch's own initialization of nn.LSTM: uniform in +-1/sqrt(H).
Weights random_weights(int64_t c, int64_t h) {
  const double k = 1.0 / std::sqrt(static_cast<double>(h));
  auto uniform = [k](std::vector<int64_t> shape) { return at::rand(shape) * (2 * k) - k; };
  return {uniform({4 * h, c}), uniform({4 * h, h}), uniform({4 * h}), uniform({4 * h})};
}

using Result = std::tuple<at::Tensor, at::Tensor, at::Tensor>;  // out [T, N, H], h [N, H], c [N, H]

Result ours(const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0, const Weights& w) {
  return lstm_sequence(x, h0, c0, w.w_ih, w.w_hh, w.b_ih, w.b_hh);
}

Result aten_lstm(const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0, const Weights& w) {
  auto [out, h, c] = at::lstm(x, {h0.unsqueeze(0), c0.unsqueeze(0)}, {w.w_ih, w.w_hh, w.b_ih, w.b_hh},
                              /*has_biases=*/true, /*num_layers=*/1, /*dropout=*/0.0, /*train=*/false,
                              /*bidirectional=*/false, /*batch_first=*/false);
  return {out, h.squeeze(0), c.squeeze(0)};
}

Result cell_loop(const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0, const Weights& w) {
  at::Tensor h = h0, c = c0;
  std::vector<at::Tensor> out;
  for (int64_t t = 0; t < x.size(0); ++t) {
    std::tie(h, c) = at::lstm_cell(x[t], {h, c}, w.w_ih, w.w_hh, w.b_ih, w.b_hh);
    out.push_back(h);
  }
  return {at::stack(out), h, c};
}

double max_difference(const at::Tensor& a, const at::Tensor& b) {
  return a.numel() == 0 ? 0.0 : (a - b).abs().max().item<double>();
}

// out and h lie in (-1, 1): 1e-5 absolute. c grows without bound over a
// sequence: 1e-5 relative to its largest magnitude (at least 1).
void expect_close(const Result& got, const Result& want, const std::string& what) {
  const auto& [out, h, c] = got;
  const auto& [want_out, want_h, want_c] = want;
  ASSERT_EQ(out.sizes(), want_out.sizes()) << what;
  ASSERT_EQ(h.sizes(), want_h.sizes()) << what;
  ASSERT_EQ(c.sizes(), want_c.sizes()) << what;
  EXPECT_LE(max_difference(out, want_out), 1e-5) << what << ": out";
  EXPECT_LE(max_difference(h, want_h), 1e-5) << what << ": h";
  const double scale = std::max(1.0, want_c.abs().max().item<double>());
  EXPECT_LE(max_difference(c, want_c), 1e-5 * scale) << what << ": c";
}

class LstmSequenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    threads_ = at::get_num_threads();
    at::set_num_threads(1);
  }
  void TearDown() override { at::set_num_threads(threads_); }

 private:
  int threads_ = 1;
};

TEST_F(LstmSequenceTest, EqualsAtLstmAndALoopOfLstmCellForEveryShape) {
  at::manual_seed(20260512);
  c10::InferenceMode guard;
  for (auto [c, h] : std::vector<std::pair<int64_t, int64_t>>{{128, 128}, {40, 128}, {128, 64}, {40, 64}}) {
    const Weights w = random_weights(c, h);
    for (int64_t t : {1, 7, 64, 256}) {
      for (int64_t n : {1, 3}) {
        const at::Tensor x = at::randn({t, n, c}), h0 = at::randn({n, h}) * 0.5, c0 = at::randn({n, h});
        const std::string what = "T " + std::to_string(t) + " N " + std::to_string(n) + " C " + std::to_string(c) +
                                 " H " + std::to_string(h);
        const Result got = ours(x, h0, c0, w);
        expect_close(got, aten_lstm(x, h0, c0, w), what + " vs at::lstm");
        expect_close(got, cell_loop(x, h0, c0, w), what + " vs at::lstm_cell");
      }
    }
  }
}

// Through TorchScript as a split's source calls it: compiled with corepool's
// ops_resolver() (LibTorch's own knows no torch.ops).
TEST_F(LstmSequenceTest, RunsThroughTorchScriptAsCorepoolLstm) {
  at::manual_seed(11);
  c10::InferenceMode guard;
  const std::string source = R"(
def f(x, h, c, a, b, d, e):
    return torch.ops.corepool.lstm(x, h, c, a, b, d, e)
)";
  torch::jit::CompilationUnit unit;
  unit.define(c10::nullopt, source, ops_resolver(), nullptr);
  const Weights w = random_weights(40, 64);
  const at::Tensor x = at::randn({9, 2, 40}), h0 = at::randn({2, 64}), c0 = at::randn({2, 64});
  const auto elements = unit.get_function("f")({x, h0, c0, w.w_ih, w.w_hh, w.b_ih, w.b_hh}).toTuple()->elements();
  ASSERT_EQ(elements.size(), 3u);
  const Result scripted{elements[0].toTensor(), elements[1].toTensor(), elements[2].toTensor()};
  const Result direct = ours(x, h0, c0, w);
  EXPECT_TRUE(at::equal(std::get<0>(scripted), std::get<0>(direct)));
  EXPECT_TRUE(at::equal(std::get<1>(scripted), std::get<1>(direct)));
  EXPECT_TRUE(at::equal(std::get<2>(scripted), std::get<2>(direct)));
  expect_close(scripted, aten_lstm(x, h0, c0, w), "scripted vs at::lstm");
}

TEST_F(LstmSequenceTest, OneWeightSetServesSeveralLengthsAndBatchesInARow) {
  at::manual_seed(12);
  c10::InferenceMode guard;
  const Weights w = random_weights(128, 128);
  for (auto [t, n] : std::vector<std::pair<int64_t, int64_t>>{{5, 1}, {33, 1}, {5, 1}, {33, 4}, {200, 17}, {5, 1}}) {
    const at::Tensor x = at::randn({t, n, 128}), h0 = at::randn({n, 128}), c0 = at::randn({n, 128});
    expect_close(ours(x, h0, c0, w), aten_lstm(x, h0, c0, w), "T " + std::to_string(t) + " N " + std::to_string(n));
  }
}

TEST_F(LstmSequenceTest, AnotherThreadCountGetsItsOwnPrimitive) {
  at::manual_seed(18);
  c10::InferenceMode guard;
  const Weights w = random_weights(128, 128);
  const at::Tensor x = at::randn({64, 8, 128}), h0 = at::randn({8, 128}), c0 = at::randn({8, 128});
  for (int threads : {1, 2, 1}) {
    at::set_num_threads(threads);
    expect_close(ours(x, h0, c0, w), aten_lstm(x, h0, c0, w), std::to_string(threads) + " threads");
  }
}

TEST_F(LstmSequenceTest, AnotherWeightSetOfTheSameShapeIsNotServedTheFirstOnesWeights) {
  at::manual_seed(13);
  c10::InferenceMode guard;
  const at::Tensor x = at::randn({16, 2, 40}), h0 = at::randn({2, 64}), c0 = at::randn({2, 64});
  const Weights first = random_weights(40, 64), second = random_weights(40, 64);
  expect_close(ours(x, h0, c0, first), aten_lstm(x, h0, c0, first), "first");
  expect_close(ours(x, h0, c0, second), aten_lstm(x, h0, c0, second), "second");
  expect_close(ours(x, h0, c0, first), aten_lstm(x, h0, c0, first), "first again");
  // One tensor of the set replaced: only w_hh differs.
  const Weights mixed{first.w_ih, second.w_hh, first.b_ih, first.b_hh};
  expect_close(ours(x, h0, c0, mixed), aten_lstm(x, h0, c0, mixed), "first with the second's w_hh");
}

// Weights viewing `buffer` (w_ih, w_hh, b_ih, b_hh one after another): every
// call makes new storages over the same addresses.
Weights weights_over(std::vector<float>& buffer, int64_t c, int64_t h) {
  float* next = buffer.data();
  auto view = [&next](std::vector<int64_t> shape) {
    const at::Tensor t = at::from_blob(next, shape);
    next += t.numel();
    return t;
  };
  Weights w;
  w.w_ih = view({4 * h, c});
  w.w_hh = view({4 * h, h});
  w.b_ih = view({4 * h});
  w.b_hh = view({4 * h});
  return w;
}

TEST_F(LstmSequenceTest, NewWeightsWhereFreedOnesWereAreNotServedTheFreedOnes) {
  at::manual_seed(14);
  c10::InferenceMode guard;
  const int64_t c = 40, h = 64;
  const at::Tensor x = at::randn({16, 2, c}), h0 = at::randn({2, h}), c0 = at::randn({2, h});
  std::vector<float> buffer(4 * h * (c + h + 2));
  const Weights first = random_weights(c, h), second = random_weights(c, h);
  // A model freed and the next one loaded at the same addresses (an arena,
  // a mapping reused): same addresses, shapes and strides, other values.
  for (const Weights* values : {&first, &second, &first}) {
    const Weights w = weights_over(buffer, c, h);
    w.w_ih.copy_(values->w_ih);
    w.w_hh.copy_(values->w_hh);
    w.b_ih.copy_(values->b_ih);
    w.b_hh.copy_(values->b_hh);
    expect_close(ours(x, h0, c0, w), aten_lstm(x, h0, c0, *values), values == &first ? "first" : "second");
  }
}

TEST_F(LstmSequenceTest, NonContiguousArgumentsAreReadAsTheirValues) {
  at::manual_seed(15);
  c10::InferenceMode guard;
  const Weights w = random_weights(40, 64);
  const Weights strided{w.w_ih.t().contiguous().t(), w.w_hh.t().contiguous().t(),
                        at::stack({w.b_ih, w.b_ih}, 1).select(1, 0), w.b_hh};
  ASSERT_FALSE(strided.w_ih.is_contiguous());
  ASSERT_FALSE(strided.b_ih.is_contiguous());
  const at::Tensor x = at::randn({3, 10, 40}).transpose(0, 1);  // [T = 10, N = 3, C]
  const at::Tensor h0 = at::randn({64, 3}).t(), c0 = at::randn({64, 3}).t();
  ASSERT_FALSE(x.is_contiguous());
  expect_close(ours(x, h0, c0, strided), aten_lstm(x.contiguous(), h0.contiguous(), c0.contiguous(), w), "strided");
  // The same values contiguous, then strided again: each set gets its own entry.
  expect_close(ours(x, h0, c0, w), aten_lstm(x.contiguous(), h0.contiguous(), c0.contiguous(), w), "contiguous");
  expect_close(ours(x, h0, c0, strided), aten_lstm(x.contiguous(), h0.contiguous(), c0.contiguous(), w), "again");
}

TEST_F(LstmSequenceTest, AnEmptySequenceReturnsTheInitialState) {
  c10::InferenceMode guard;
  const Weights w = random_weights(40, 64);
  const at::Tensor x = at::empty({0, 2, 40}), h0 = at::randn({2, 64}), c0 = at::randn({2, 64});
  const auto [out, h, c] = ours(x, h0, c0, w);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{0, 2, 64}));
  EXPECT_TRUE(at::equal(h, h0));
  EXPECT_TRUE(at::equal(c, c0));
  EXPECT_NE(h.data_ptr(), h0.data_ptr());  // copies
  EXPECT_NE(c.data_ptr(), c0.data_ptr());
}

TEST_F(LstmSequenceTest, PrimitivesEvictedFromTheThreadsCacheAreMadeAgain) {
  at::manual_seed(17);
  c10::InferenceMode guard;
  const Weights w = random_weights(8, 16);
  const int64_t lengths = static_cast<int64_t>(kLstmPrimitivesPerThread) + 20;
  const at::Tensor x = at::randn({lengths, 2, 8}), h0 = at::randn({2, 16}), c0 = at::randn({2, 16});
  // One primitive per length: the first ones are evicted before the loop ends.
  for (int64_t round = 0; round < 2; ++round) {
    for (int64_t t = 1; t <= lengths; t += round == 0 ? 1 : 37) {
      const at::Tensor part = x.slice(0, 0, t);
      expect_close(ours(part, h0, c0, w), aten_lstm(part, h0, c0, w), "T " + std::to_string(t));
    }
  }
}

// Runs the op on the given arguments and expects a c10::Error whose message
// names the op and every fragment of `names`.
void expect_rejected(const std::vector<at::Tensor>& a, const std::vector<std::string>& names) {
  try {
    lstm_sequence(a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
    ADD_FAILURE() << "no error for " << names.front();
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    EXPECT_NE(message.find("corepool::lstm"), std::string::npos) << message;
    for (const std::string& name : names) EXPECT_NE(message.find(name), std::string::npos) << message;
  }
}

TEST_F(LstmSequenceTest, BadArgumentsThrowNamingTheOpAndTheArgument) {
  c10::InferenceMode guard;
  const Weights w = random_weights(40, 64);
  const at::Tensor x = at::randn({5, 2, 40}), h0 = at::randn({2, 64}), c0 = at::randn({2, 64});
  auto args = [&](int which, const at::Tensor& replacement) {
    std::vector<at::Tensor> a{x, h0, c0, w.w_ih, w.w_hh, w.b_ih, w.b_hh};
    a[which] = replacement;
    return a;
  };
  expect_rejected(args(0, at::randn({5, 40})), {"x must be [T, N, C]", "[5, 40]"});
  expect_rejected(args(0, at::randn({5, 2, 40}, at::kDouble)), {"x must be a dense float32", "Double"});
  expect_rejected(args(1, at::randn({3, 64})), {"h0 must be [N, H]", "[3, 64]"});
  expect_rejected(args(1, at::randn({2, 64}).to(at::kHalf)), {"h0", "Half"});
  expect_rejected(args(2, at::randn({2, 32})), {"c0 must be [N, H] = [2, 64]", "[2, 32]"});
  expect_rejected(args(3, at::randn({256, 41})), {"w_ih must be [4H, C] = [256, 40]", "[256, 41]"});
  expect_rejected(args(3, at::randn({256, 40}).to(at::kInt)), {"w_ih", "Int"});
  expect_rejected(args(4, at::randn({256, 32})), {"w_hh must be [4H, H] = [256, 64]", "[256, 32]"});
  expect_rejected(args(4, at::randn({64, 256})), {"w_hh", "[64, 256]"});
  expect_rejected(args(5, at::randn({255})), {"b_ih must be [4H] = [256]", "[255]"});
  expect_rejected(args(6, at::randn({1, 256})), {"b_hh must be [4H] = [256]", "[1, 256]"});
  expect_rejected(args(1, at::randn({2, 0})), {"H > 0"});
  expect_rejected(args(6, at::Tensor()), {"b_hh is undefined"});
}

// Microseconds per step of one call over the whole sequence, best of `rounds`
// after a warm-up call.
template <typename Run>
double us_per_step(int64_t steps, int rounds, Run run) {
  run();
  double best = 1e300;
  for (int i = 0; i < rounds; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count() / steps);
  }
  return best;
}

TEST_F(LstmSequenceTest, PrintsTheTimePerStepAgainstAtLstm) {
  at::manual_seed(16);
  c10::InferenceMode guard;
  const int64_t t = 256;
  const Weights w = random_weights(128, 128);
  const at::Tensor x = at::randn({t, 1, 128}), h0 = at::randn({1, 128}), c0 = at::randn({1, 128});
  const double mine = us_per_step(t, 20, [&] { ours(x, h0, c0, w); });
  const double aten = us_per_step(t, 20, [&] { aten_lstm(x, h0, c0, w); });
  std::printf("T = 256, N = 1, C = H = 128, one thread: corepool::lstm %.2f us per step, at::lstm %.2f (%.1fx)\n", mine,
              aten, aten / mine);
}

}  // namespace
}  // namespace corepool
