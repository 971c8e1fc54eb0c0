// Log-mel features: shapes, the filterbank's geometry, and the log-mel itself
// against an independent reference written here from the definition (a naive
// DFT and an HTK mel filterbank in double precision), never against the
// extractor's own filterbank.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <thread>
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

// ---- The reference, from the definition (worker/features.h's contract) ----
// Frames centred on t * hop with reflect padding of n_fft / 2, a periodic Hann
// window of n_fft, the one-sided power spectrum |X_k|^2, triangular filters on
// the HTK mel scale (mel = 2595 log10(1 + f / 700)) with n_mels + 2 equally
// spaced edges from fmin to fmax, then ln(mel energy + 1e-6).

double htk_mel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double htk_hz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

// [n_mels][n_fft / 2 + 1]: filter m rises from edge m to edge m+1 and falls to edge m+2.
std::vector<std::vector<double>> naive_filterbank(const ModelConfig& cfg) {
  const double fmax = cfg.fmax > 0 ? cfg.fmax : cfg.sample_rate / 2.0;
  const int bins = cfg.n_fft / 2 + 1;
  std::vector<double> edge(cfg.n_mels + 2);
  for (size_t i = 0; i < edge.size(); ++i) {
    edge[i] = htk_hz(htk_mel(cfg.fmin) + (htk_mel(fmax) - htk_mel(cfg.fmin)) * double(i) / (cfg.n_mels + 1));
  }
  std::vector<std::vector<double>> fb(cfg.n_mels, std::vector<double>(bins));
  for (int m = 0; m < cfg.n_mels; ++m) {
    for (int k = 0; k < bins; ++k) {
      const double f = double(k) * cfg.sample_rate / cfg.n_fft;
      const double up = (f - edge[m]) / (edge[m + 1] - edge[m]);
      const double down = (edge[m + 2] - f) / (edge[m + 2] - edge[m + 1]);
      fb[m][k] = std::max(0.0, std::min(up, down));
    }
  }
  return fb;
}

// [n_mels][frames] log-mel of one segment.
std::vector<std::vector<double>> naive_log_mel(const ModelConfig& cfg, const std::vector<float>& x) {
  const int n = cfg.n_fft, hop = cfg.hop_length, pad = n / 2, len = int(x.size()), bins = n / 2 + 1;
  const int frames = 1 + len / hop;
  const auto sample = [&](int j) {  // reflect padding: x[-1] = x[1], x[len] = x[len - 2]
    if (j < 0) j = -j;
    if (j >= len) j = 2 * (len - 1) - j;
    return double(x[j]);
  };
  std::vector<double> window(n), cos_table(n), sin_table(n);
  for (int i = 0; i < n; ++i) {
    window[i] = 0.5 - 0.5 * std::cos(2 * M_PI * i / n);
    cos_table[i] = std::cos(2 * M_PI * i / n);
    sin_table[i] = std::sin(2 * M_PI * i / n);
  }
  const auto fb = naive_filterbank(cfg);
  std::vector<std::vector<double>> out(cfg.n_mels, std::vector<double>(frames));
  std::vector<double> frame(n), power(bins);
  for (int t = 0; t < frames; ++t) {
    for (int i = 0; i < n; ++i) frame[i] = window[i] * sample(t * hop + i - pad);
    for (int k = 0; k < bins; ++k) {
      double re = 0, im = 0;
      for (int i = 0; i < n; ++i) {
        const int phase = int((int64_t(k) * i) % n);
        re += frame[i] * cos_table[phase];
        im -= frame[i] * sin_table[phase];
      }
      power[k] = re * re + im * im;
    }
    for (int m = 0; m < cfg.n_mels; ++m) {
      double energy = 0;
      for (int k = 0; k < bins; ++k) energy += fb[m][k] * power[k];
      out[m][t] = std::log(energy + 1e-6);
    }
  }
  return out;
}

// Tones at 300, 1000 and 4000 Hz over white noise: energy in every band.
std::vector<float> tones_over_noise(const ModelConfig& cfg) {
  std::vector<float> v(cfg.segment_samples());
  uint32_t state = 12345;
  for (size_t i = 0; i < v.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    const double noise = ((state >> 8) * (1.0 / 16777216.0) - 0.5) * 0.05;
    double s = noise;
    for (double hz : {300.0, 1000.0, 4000.0}) s += 0.2 * std::sin(2 * M_PI * hz * double(i) / cfg.sample_rate);
    v[i] = static_cast<float>(s);
  }
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

TEST(FeaturesTest, TheFilterbankIsTheHtkMelFilterbank) {
  const ModelConfig cfg = logmel_config();
  const std::vector<float> fb = mel_filterbank_weights(cfg.sample_rate, cfg.n_fft, cfg.n_mels, cfg.fmin, cfg.fmax);
  const auto reference = naive_filterbank(cfg);
  const int bins = cfg.n_fft / 2 + 1;
  ASSERT_EQ(fb.size(), size_t(cfg.n_mels) * bins);
  for (int m = 0; m < cfg.n_mels; ++m) {
    for (int k = 0; k < bins; ++k) ASSERT_NEAR(fb[size_t(m) * bins + k], reference[m][k], 1e-6) << m << ", " << k;
  }
}

// The whole log-mel, every band of every frame (the reflect-padded edges
// included), against the double-precision reference. 1e-3 in ln is 0.1 %
// of a band's energy: far above float32 rounding in the STFT, far below any
// wrong window, hop, padding, scale or log.
TEST(FeaturesTest, LogMelEqualsANaiveDftAndHtkFilterbankInDoublePrecision) {
  const ModelConfig cfg = logmel_config();
  FeatureExtractor fx(cfg);
  const std::vector<float> x = tones_over_noise(cfg);
  const torch::Tensor t = fx.compute({x.data()}).squeeze().contiguous();  // [n_mels, frames]
  const auto reference = naive_log_mel(cfg, x);
  ASSERT_EQ(t.size(0), int64_t(reference.size()));
  ASSERT_EQ(t.size(1), int64_t(reference[0].size()));
  const auto got = t.accessor<float, 2>();
  double worst = 0;
  for (int m = 0; m < cfg.n_mels; ++m) {
    for (int64_t f = 0; f < t.size(1); ++f) {
      worst = std::max(worst, std::fabs(got[m][f] - reference[m][f]));
      ASSERT_NEAR(got[m][f], reference[m][f], 1e-3) << "band " << m << ", frame " << f;
    }
  }
  std::printf("largest log-mel difference from the reference: %.2e\n", worst);
}

// A batch of different segments in another geometry: each item equals the
// reference of its own segment (no item's frames leak into another's), with
// an odd hop, fmin above 0, and so many mels for n_fft 128 that the lowest
// filters fall between two FFT bins and have no weight at all (their band
// sits at the floor, as the reference's does).
TEST(FeaturesTest, EveryItemOfABatchEqualsTheReferenceOfItsOwnSegment) {
  ModelConfig cfg = logmel_config();
  cfg.sample_rate = 8000;
  cfg.segment_seconds = 0.25;
  cfg.n_fft = 128;
  cfg.hop_length = 37;
  cfg.n_mels = 80;
  cfg.fmin = 20;
  cfg.fmax = 0;  // sample_rate / 2
  FeatureExtractor fx(cfg);
  const std::vector<std::vector<float>> segments = {tones_over_noise(cfg), tone(700, cfg.segment_samples(), 8000),
                                                    std::vector<float>(cfg.segment_samples(), 0.0f)};
  const torch::Tensor t = fx.compute({segments[0].data(), segments[1].data(), segments[2].data()});
  ASSERT_EQ(t.sizes(), (std::vector<int64_t>{3, 1, 80, 1 + cfg.segment_samples() / 37}));
  const auto fb = naive_filterbank(cfg);
  ASSERT_TRUE(std::all_of(fb[0].begin(), fb[0].end(), [](double w) { return w == 0; }))
      << "the geometry no longer has an empty filter";
  for (size_t b = 0; b < segments.size(); ++b) {
    const auto reference = naive_log_mel(cfg, segments[b]);
    const auto got = t[b][0].contiguous();
    for (int m = 0; m < cfg.n_mels; ++m) {
      for (int64_t f = 0; f < got.size(1); ++f) {
        ASSERT_NEAR(got[m][f].item<float>(), reference[m][f], 1e-3) << "item " << b << ", band " << m << ", frame " << f;
      }
    }
  }
}

// `count` segments of one stream of noise, each hop_samples after the last:
// consecutive items overlap, as the segmenter makes them.
std::vector<std::vector<float>> overlapping_segments(const ModelConfig& cfg, int count) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> noise(-0.5f, 0.5f);
  std::vector<float> stream(cfg.segment_samples() + (count - 1) * cfg.hop_samples());
  for (float& x : stream) x = noise(rng);
  std::vector<std::vector<float>> out;
  for (int i = 0; i < count; ++i) {
    const float* start = stream.data() + i * cfg.hop_samples();
    out.emplace_back(start, start + cfg.segment_samples());
  }
  return out;
}

// Each item computed in a batch of its own (nothing to share), for comparison.
torch::Tensor one_by_one(const FeatureExtractor& fx, const std::vector<std::vector<float>>& segments) {
  std::vector<torch::Tensor> rows;
  for (const auto& s : segments) rows.push_back(fx.compute({s.data()}));
  return torch::cat(rows, 0);
}

std::vector<const float*> pointers(const std::vector<std::vector<float>>& segments) {
  std::vector<const float*> out;
  for (const auto& s : segments) out.push_back(s.data());
  return out;
}

// The frames consecutive segments share are computed once: a batch of a
// stream's segments is bitwise what each gives alone, and one of them
// against the naive reference.
TEST(FeaturesTest, OverlappingSegmentsOfOneStreamGiveEachItsOwnFeaturesToTheBit) {
  const ModelConfig cfg = logmel_config();  // 1 s segments, 0.5 s hop: 50 frames apart
  FeatureExtractor fx(cfg);
  const auto segments = overlapping_segments(cfg, 5);
  const torch::Tensor batch = fx.compute(pointers(segments));
  EXPECT_TRUE(torch::equal(batch, one_by_one(fx, segments)));
  const auto reference = naive_log_mel(cfg, segments[3]);
  const auto got = batch[3][0].contiguous();
  for (int m = 0; m < cfg.n_mels; m += 7) {
    for (int64_t f = 0; f < got.size(1); f += 5) ASSERT_NEAR(got[m][f].item<float>(), reference[m][f], 1e-3);
  }
}

// One sample of the part two segments would share differs: nothing may be
// copied from the earlier one (the frames over that sample must change).
TEST(FeaturesTest, SegmentsThatAlmostOverlapShareNothing) {
  const ModelConfig cfg = logmel_config();
  FeatureExtractor fx(cfg);
  auto segments = overlapping_segments(cfg, 2);
  segments[1][cfg.segment_samples() / 4] += 0.25f;  // frame 25's window, inside the shared part
  EXPECT_TRUE(torch::equal(fx.compute(pointers(segments)), one_by_one(fx, segments)));
  // An odd hop (not a whole number of frames): frames do not line up; no sharing either.
  ModelConfig odd = cfg;
  odd.hop_seconds = 0.505;  // 8080 samples, 50.5 frames
  FeatureExtractor fx_odd(odd);
  const auto odd_segments = overlapping_segments(odd, 3);
  EXPECT_TRUE(torch::equal(fx_odd.compute(pointers(odd_segments)), one_by_one(fx_odd, odd_segments)));
}

TEST(FeaturesTest, AToneLightsUpTheMelBandContainingItsFrequency) {
  const ModelConfig cfg = logmel_config();
  FeatureExtractor fx(cfg);
  const auto fb = naive_filterbank(cfg);
  for (double hz : {300.0, 1000.0, 4000.0}) {
    std::vector<float> x = tone(hz, cfg.segment_samples(), cfg.sample_rate);
    torch::Tensor t = fx.compute({x.data()}).squeeze();   // [n_mels, frames]
    const int64_t loudest = t.mean(1).argmax().item<int64_t>();
    // The reference filter with the largest weight at the tone's FFT bin.
    const int bin = static_cast<int>(std::lround(hz * cfg.n_fft / cfg.sample_rate));
    int64_t expected = 0;
    for (int m = 0; m < cfg.n_mels; ++m) {
      if (fb[m][bin] > fb[expected][bin]) expected = m;
    }
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

// Process mode forks workers from the supervisor while another of its
// threads may be building an extractor (a reload's calibration): a child
// forked then must still be able to plan, not inherit the FFTW planner's
// lock held by a thread that does not exist in it. One extractor first, as
// the supervisor builds and calibrates one before it forks: LibTorch's ops
// initialise function-local statics on their first call, and a fork in the
// middle of that would hang the child in LibTorch, not in corepool.
TEST(FeaturesTest, AChildForkedWhileAnotherThreadPlansCanPlanToo) {
  const ModelConfig cfg = logmel_config();
  { FeatureExtractor first(cfg); }
  std::atomic<bool> stop{false};
  std::thread planner([&] {
    while (!stop) FeatureExtractor fx(cfg);
  });
  int stuck = 0;
  for (int i = 0; i < 100; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::alarm(5);  // a child that cannot plan dies of SIGALRM
      FeatureExtractor fx(cfg);
      ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++stuck;
  }
  stop = true;
  planner.join();
  EXPECT_EQ(stuck, 0) << "children forked while the other thread planned could not plan";
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
