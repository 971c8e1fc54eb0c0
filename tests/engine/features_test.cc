// Log-mel features: shapes, the filterbank's geometry, and that a pure tone
// lights up the mel band that contains its frequency.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "worker/features.h"

namespace corepool {
namespace {

ModelConfig logmel_config() {
  ModelConfig cfg;
  cfg.name = "t";
  cfg.sample_rate = 16000;
  cfg.segment_seconds = 1.0;
  cfg.hop_seconds = 0.5;
  cfg.n_fft = 512;
  cfg.hop_length = 160;
  cfg.n_mels = 64;
  cfg.fmax = 8000;
  cfg.labels = {"a"};
  cfg.thresholds = {0.5f};
  return cfg;
}

std::vector<float> tone(double hz, int n, int rate) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(0.5 * std::sin(2 * M_PI * hz * i / rate));
  return v;
}

TEST(FeaturesTest, LogMelHasTheShapeTheModelExpects) {
  const ModelConfig cfg = logmel_config();
  FeatureExtractor fx(cfg);
  std::vector<float> a(cfg.segment_samples(), 0.1f), b(cfg.segment_samples(), -0.1f);
  torch::Tensor t = fx.compute({a.data(), b.data()});
  ASSERT_EQ(t.dim(), 4);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(1), 1);
  EXPECT_EQ(t.size(2), cfg.n_mels);
  EXPECT_EQ(t.size(3), cfg.frames_per_segment());
}

TEST(FeaturesTest, EveryMelFilterIsATrianglePeakingHigherThanTheLast) {
  const int bins = 257;
  std::vector<float> fb = mel_filterbank_weights(16000, 512, 64, 0, 8000);
  int last_peak = -1;
  for (int m = 0; m < 64; ++m) {
    const float* row = fb.data() + m * bins;
    int peak = 0;
    for (int k = 0; k < bins; ++k) {
      EXPECT_GE(row[k], 0.0f);
      EXPECT_LE(row[k], 1.0f);
      if (row[k] > row[peak]) peak = k;
    }
    EXPECT_GT(row[peak], 0.0f) << "filter " << m << " is empty";
    EXPECT_GE(peak, last_peak) << "filter " << m;
    last_peak = peak;
  }
}

TEST(FeaturesTest, AToneLightsUpTheMelBandContainingItsFrequency) {
  const ModelConfig cfg = logmel_config();
  FeatureExtractor fx(cfg);
  for (double hz : {300.0, 1000.0, 4000.0}) {
    std::vector<float> x = tone(hz, cfg.segment_samples(), cfg.sample_rate);
    torch::Tensor t = fx.compute({x.data()}).squeeze();   // [n_mels, frames]
    const int64_t loudest = t.mean(1).argmax().item<int64_t>();
    // The filter with the largest weight at the tone's FFT bin.
    const int bin = static_cast<int>(std::lround(hz * cfg.n_fft / cfg.sample_rate));
    torch::Tensor column = fx.mel_filterbank().index({torch::indexing::Slice(), bin});
    const int64_t expected = column.argmax().item<int64_t>();
    EXPECT_LE(std::abs(loudest - expected), 1) << hz << " Hz";
  }
}

TEST(FeaturesTest, SilenceSitsAtTheLogFloor) {
  const ModelConfig cfg = logmel_config();
  FeatureExtractor fx(cfg);
  std::vector<float> x(cfg.segment_samples(), 0.0f);
  torch::Tensor t = fx.compute({x.data()});
  EXPECT_NEAR(t.max().item<float>(), std::log(1e-6), 1e-3);
}

TEST(FeaturesTest, WaveformInputIsPassedThroughUnchanged) {
  ModelConfig cfg = logmel_config();
  cfg.input = InputKind::kWaveform;
  FeatureExtractor fx(cfg);
  std::vector<float> x = tone(440, cfg.segment_samples(), cfg.sample_rate);
  torch::Tensor t = fx.compute({x.data()});
  ASSERT_EQ(t.dim(), 2);
  EXPECT_EQ(t.size(1), cfg.segment_samples());
  EXPECT_EQ(t[0][123].item<float>(), x[123]);
}

}  // namespace
}  // namespace corepool
