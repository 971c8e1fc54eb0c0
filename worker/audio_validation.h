// Stage 1 of the pipeline: is this file audio we can process? Opens the file with
// libsndfile and checks the header (rate, channels, length) without decoding it.
// Called by AudioStream before any sample is read and by batch before any output.
#pragma once

#include <cstdint>
#include <string>

#include "worker/audio_error.h"

namespace corepool {

struct AudioInfo {
  int sample_rate = 0;
  int channels = 0;
  int64_t frames = 0;       // per channel, as the header says
  std::string format;       // e.g. "WAV (Microsoft) / Signed 16 bit PCM"
  double duration_seconds() const { return sample_rate > 0 ? double(frames) / sample_rate : 0.0; }
};

// Sane limits: anything outside is "absurd" and rejected.
constexpr int kMinSampleRate = 1000;
constexpr int kMaxSampleRate = 768000;
constexpr int kMaxChannels = 32;

// Throws AudioError naming the file and the reason: missing, unreadable (permissions),
// a directory, not audio, 0 Hz / absurd rate, more than kMaxChannels channels,
// no frames (empty / zero length).
AudioInfo validate_audio(const std::string& path);

}  // namespace corepool
