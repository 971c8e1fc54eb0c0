// Log-mel with LibTorch's own STFT (pocketfft inside): centered frames with
// reflect padding, power spectrum, HTK mel filterbank, natural log with a floor.
#include "worker/features.h"

#include <cmath>
#include <cstring>

namespace corepool {
namespace {

double hz_to_mel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double mel_to_hz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

// log(mel + kFloor): the floor keeps silence finite (about -13.8).
constexpr double kLogFloor = 1e-6;

}  // namespace

std::vector<float> mel_filterbank_weights(int sample_rate, int n_fft, int n_mels, double fmin, double fmax) {
  if (fmax <= 0) fmax = sample_rate / 2.0;
  const int bins = n_fft / 2 + 1;
  std::vector<double> edges(n_mels + 2);
  const double lo = hz_to_mel(fmin), hi = hz_to_mel(fmax);
  for (int i = 0; i < n_mels + 2; ++i) edges[i] = mel_to_hz(lo + (hi - lo) * i / (n_mels + 1));
  std::vector<float> fb(static_cast<size_t>(n_mels) * bins, 0.0f);
  for (int m = 0; m < n_mels; ++m) {
    const double left = edges[m], centre = edges[m + 1], right = edges[m + 2];
    for (int k = 0; k < bins; ++k) {
      const double f = static_cast<double>(k) * sample_rate / n_fft;
      double w = 0.0;
      if (f > left && f <= centre) w = (f - left) / (centre - left);
      else if (f > centre && f < right) w = (right - f) / (right - centre);
      fb[static_cast<size_t>(m) * bins + k] = static_cast<float>(w);
    }
  }
  return fb;
}

FeatureExtractor::FeatureExtractor(const ModelConfig& config) : config_(config) {
  if (config_.input != InputKind::kLogMel) return;
  window_ = torch::hann_window(config_.n_fft, torch::TensorOptions().dtype(torch::kFloat32));
  std::vector<float> fb = mel_filterbank_weights(config_.sample_rate, config_.n_fft, config_.n_mels,
                                                 config_.fmin, config_.fmax);
  mel_fb_ = torch::from_blob(fb.data(), {config_.n_mels, config_.n_fft / 2 + 1}).clone();
}

torch::Tensor FeatureExtractor::compute(const std::vector<const float*>& segments) const {
  const int64_t batch = static_cast<int64_t>(segments.size());
  const int64_t samples = config_.segment_samples();
  torch::Tensor pcm = torch::empty({batch, samples}, torch::kFloat32);
  float* dst = pcm.data_ptr<float>();
  for (int64_t i = 0; i < batch; ++i) {
    std::memcpy(dst + i * samples, segments[i], sizeof(float) * samples);
  }
  if (config_.input == InputKind::kWaveform) return pcm;
  return log_mel(pcm);
}

torch::Tensor FeatureExtractor::log_mel(const torch::Tensor& pcm) const {
  torch::Tensor spec = torch::stft(pcm, config_.n_fft, config_.hop_length, config_.n_fft, window_,
                                   /*center=*/true, "reflect", /*normalized=*/false,
                                   /*onesided=*/true, /*return_complex=*/true);
  // |X|^2 via abs().square_(): several times cheaper than squaring and summing
  // the real/imaginary view, which materialises two extra tensors.
  torch::Tensor power = spec.abs().square_();                       // [B, bins, frames]
  torch::Tensor mel = torch::matmul(mel_fb_, power);                // [B, n_mels, frames]
  return mel.add_(kLogFloor).log_().unsqueeze(1);
}

}  // namespace corepool
