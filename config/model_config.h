// The model contract: a model is a directory with model.pt (TorchScript) and
// model.toml (input kind, sample rate, feature parameters, segment length,
// labels, thresholds). Parsed once at startup by the engine; a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"

namespace corepool {

enum class InputKind { kLogMel, kWaveform };

struct ModelConfig {
  std::string name;                   // [model] name
  InputKind input = InputKind::kLogMel;  // [model] input = "logmel" | "waveform"
  int sample_rate = 16000;            // [model] sample_rate, Hz (1000..192000)
  double segment_seconds = 1.0;       // [model] segment_seconds (0 < s <= 60)
  double hop_seconds = 0.5;           // [model] hop_seconds (0 < h <= 60)
  int n_fft = 512;                    // [features] n_fft (power of two, 16..8192)
  int hop_length = 160;               // [features] hop_length in samples (1..n_fft)
  int n_mels = 64;                    // [features] n_mels (1..512)
  double fmin = 0.0;                  // [features] fmin, Hz (>= 0)
  double fmax = 0.0;                  // [features] fmax, Hz (0 = sample_rate / 2)
  std::vector<std::string> labels;    // [labels] names (non-empty, unique)
  std::vector<float> thresholds;      // one per label: [labels] threshold (default 0.5),
                                      // overridden per label by [labels.thresholds]
  int max_batch = 64;                 // [model] max_batch the module accepts (>= 1)

  // Segment length and hop in samples at sample_rate (rounded to nearest).
  int segment_samples() const;
  int hop_samples() const;
  // Frames of log-mel per segment: 1 + segment_samples / hop_length (centered STFT).
  int frames_per_segment() const;
  // The model's input for ONE item, batch dim left out, as the feature step
  // lays it out: log-mel {1, n_mels, frames}, waveform {segment_samples}.
  // A model-input request (KServe v2 infer) must hold exactly item_floats()
  // floats in this shape, row-major.
  std::vector<int64_t> item_shape() const;
  int64_t item_floats() const;
};

// Parses `path` (a model.toml). Throws ConfigError naming file, line and key.
ModelConfig load_model_config(const std::string& path);

// Serializes back to TOML text (used by the model generator so that the file
// it writes is exactly what load_model_config reads).
std::string to_toml(const ModelConfig& config);

}  // namespace corepool
