// Stage 1 of the pipeline: is this file audio we can process? Opens the file (a
// path, or a buffer in memory) with libsndfile and checks the header (rate,
// channels, length) without decoding it. Called by AudioStream before any sample
// is read, by batch before any output and by serve on a request body.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "audio/audio_error.h"
#include "audio/audio_source.h"

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
// no frames (empty / zero length). See AudioErrorKind for which is which.
AudioInfo validate_audio(const std::string& path);

// The same checks on a whole file held in memory (e.g. an HTTP request body),
// without temp files. `name` starts every message ("request body: ..."). An
// empty buffer is kInvalid, "empty (0 bytes)". `bytes` is only read during the call.
AudioInfo validate_audio_bytes(const std::string& name, std::string_view bytes);

// What AudioStream needs: the checks above, with libsndfile's handle left open
// (positioned at the first frame) for decoding. A memory source's bytes must
// outlive `file`.
struct ValidatedAudio {
  AudioInfo info;
  std::unique_ptr<SoundFile> file;
};
ValidatedAudio open_validated(const AudioSource& source);

}  // namespace corepool
