// Tests of Resampler (audio/resampler.h): passthrough, refused ratios, output
// length including the flushed tail, kept frequency, and block independence.
// Pure in-memory: no files, no fixture.
#include "audio/resampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace corepool {
namespace {

std::vector<float> sine(double hz, int rate, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(0.5 * std::sin(2 * M_PI * hz * double(i) / rate));
  return v;
}

int zero_crossings(const std::vector<float>& x) {
  int n = 0;
  for (size_t i = 1; i < x.size(); ++i) n += (x[i] >= 0) != (x[i - 1] >= 0);
  return n;
}

// Feeds `in` in blocks of `block`, then flushes.
std::vector<float> resample(Resampler& r, const std::vector<float>& in, size_t block) {
  std::vector<float> out;
  for (size_t pos = 0; pos < in.size(); pos += block) {
    r.process(in.data() + pos, std::min(block, in.size() - pos), false, out);
  }
  r.process(nullptr, 0, true, out);
  return out;
}

TEST(ResamplerTest, EqualRatesPassSamplesThroughUnchanged) {
  Resampler r(16000, 16000);
  EXPECT_TRUE(r.passthrough());
  const std::vector<float> in = sine(440, 16000, 5000);
  EXPECT_EQ(resample(r, in, 777), in);
}

TEST(ResamplerTest, NonPositiveRatesAreRefused) {
  EXPECT_NO_THROW(Resampler(1000, 1000 * 300)) << "soxr takes any ratio libsamplerate took and more";
  EXPECT_THROW(Resampler(0, 16000), std::runtime_error);
  EXPECT_THROW(Resampler(16000, -1), std::runtime_error);
}

TEST(ResamplerTest, DownsamplingGivesTheRateRatioOfSamplesOnceFlushed) {
  Resampler r(44100, 16000);
  EXPECT_FALSE(r.passthrough());
  const std::vector<float> in = sine(440, 44100, 44100);
  std::vector<float> unflushed;
  r.process(in.data(), in.size(), false, unflushed);
  const std::vector<float> out = [&] {
    std::vector<float> all = unflushed;
    r.process(nullptr, 0, true, all);
    return all;
  }();
  EXPECT_LT(unflushed.size(), out.size()) << "the flush must release the filter's tail";
  EXPECT_NEAR(double(out.size()), 16000.0, 2.0);
}

TEST(ResamplerTest, UpsamplingKeepsAToneFrequency) {
  Resampler r(8000, 16000);
  const std::vector<float> out = resample(r, sine(1000, 8000, 8000), 512);
  EXPECT_NEAR(double(out.size()), 16000.0, 2.0);
  EXPECT_NEAR(zero_crossings(out), 2 * 1000, 4);
  // Away from the edges the output is the same sine at the new rate.
  const std::vector<float> ideal = sine(1000, 16000, out.size());
  for (size_t i = 1000; i + 1000 < out.size(); ++i) ASSERT_NEAR(out[i], ideal[i], 1e-3) << i;
}

TEST(ResamplerTest, BlockSizeDoesNotChangeTheOutput) {
  const std::vector<float> in = sine(440, 48000, 48000);
  Resampler one_block(48000, 16000);
  Resampler tiny_blocks(48000, 16000);
  const std::vector<float> a = resample(one_block, in, in.size());
  const std::vector<float> b = resample(tiny_blocks, in, 97);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << i;
}

}  // namespace
}  // namespace corepool
