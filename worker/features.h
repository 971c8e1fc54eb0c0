// Stage 2c of the pipeline: turns a batch of PCM segments into the tensor the
// model takes: log-mel [B, 1, n_mels, frames] or raw waveform [B, samples], as
// model.toml says. One extractor per model, shared read-only by engine threads.
#pragma once

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

 private:
  torch::Tensor log_mel(const torch::Tensor& pcm) const;

  ModelConfig config_;
  torch::Tensor window_;   // periodic Hann, n_fft
  torch::Tensor mel_fb_;
};

// Mel filterbank as plain numbers (row-major [n_mels][n_fft/2 + 1]); exposed for tests.
std::vector<float> mel_filterbank_weights(int sample_rate, int n_fft, int n_mels, double fmin, double fmax);

}  // namespace corepool
