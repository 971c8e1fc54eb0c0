// Test input for the engine tests: deterministic segments of PCM (noise, or
// noise over a tone) that differ by seed or index, so that every segment of a
// run gives different scores; and the pointers Engine::infer takes.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "config/model_config.h"

namespace corepool::testing {

// A deterministic segment of `samples` floats that differs with `index`:
// noise of index-dependent loudness over a tone of index-dependent pitch, so
// that every segment of a test run gives different scores.
inline std::vector<float> test_segment(size_t samples, uint64_t index) {
  std::vector<float> v(samples);
  uint32_t x = static_cast<uint32_t>(index * 2654435761u + 17);
  for (size_t i = 0; i < v.size(); ++i) {
    x = x * 1664525u + 1013904223u;
    const float noise = static_cast<float>((x >> 8) * (1.0 / 16777216.0) - 0.5);
    v[i] = 0.3f * noise * static_cast<float>(index % 5 + 1) + 0.2f * std::sin(0.01f * i * (index % 7 + 1));
  }
  return v;
}

// `n` segments of uniform noise in [-0.2, 0.2) from an LCG seeded with `seed`.
inline std::vector<std::vector<float>> noise_segments(const ModelConfig& cfg, int n, unsigned seed) {
  std::vector<std::vector<float>> out(n, std::vector<float>(cfg.segment_samples()));
  uint32_t x = seed;
  for (auto& seg : out) {
    for (auto& v : seg) {
      x = x * 1664525u + 1013904223u;
      v = static_cast<float>((x >> 8) * (1.0 / 16777216.0) - 0.5) * 0.4f;
    }
  }
  return out;
}

inline std::vector<const float*> pointers(const std::vector<std::vector<float>>& v) {
  std::vector<const float*> p;
  for (const auto& s : v) p.push_back(s.data());
  return p;
}

}  // namespace corepool::testing
