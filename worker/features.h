// Stage 2c of the pipeline: turns a batch of PCM segments into the tensor the
// model takes: log-mel [B, 1, n_mels, frames] or raw waveform [B, samples], as
// model.toml says. One extractor per model, shared read-only by engine threads.
#pragma once

#include <memory>
#include <vector>

#include <torch/script.h>

#include "config/model_config.h"

namespace corepool {

class FeatureExtractor {
 public:
  explicit FeatureExtractor(const ModelConfig& config);

  // `segments` holds B pointers to segment_samples() floats each. Thread-safe.
  torch::Tensor compute(const std::vector<const float*>& segments) const;

  // The triangular mel filterbank [n_mels, n_fft/2 + 1] (HTK mel scale).
  const torch::Tensor& mel_filterbank() const { return mel_fb_; }

  // One mel filter's nonzero run of FFT bins: weights[offset + i] for bin first + i.
  struct MelRun {
    int first = 0, count = 0, offset = 0;
  };

 private:
  torch::Tensor log_mel(const std::vector<const float*>& segments) const;

  ModelConfig config_;
  torch::Tensor mel_fb_;
  std::vector<float> window_;       // periodic Hann, n_fft
  std::vector<MelRun> mel_runs_;    // per mel filter
  std::vector<float> mel_weights_;  // the filters' nonzero weights, run after run
  std::shared_ptr<void> plan_;      // FFTW's real-to-complex plan of n_fft points
};

// Mel filterbank as plain numbers (row-major [n_mels][n_fft/2 + 1]); exposed for tests.
std::vector<float> mel_filterbank_weights(int sample_rate, int n_fft, int n_mels, double fmin, double fmax);

}  // namespace corepool
