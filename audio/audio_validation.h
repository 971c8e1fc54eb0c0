// Stage 1 of the pipeline: is this file audio we can process? Opens the file (a
// path, or a buffer in memory) with FFmpeg's demuxer, picks its audio stream and
// checks what the container says (rate, channels, length) without decoding.
// Called by AudioStream before any sample is read, by batch before any output
// and by serve on a request body.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "audio/audio_decoder.h"
#include "audio/audio_error.h"
#include "audio/audio_source.h"

namespace corepool {

struct AudioInfo {
  int sample_rate = 0;
  int channels = 0;
  int64_t frames = 0;       // per channel, as the container says (an estimate unless frames_exact; 0: unknown)
  bool frames_exact = false;  // the container states its length (WAV, FLAC, MP4...): a shortfall is truncation
  int64_t frames_slack = 0;   // how far a lossy codec's decoded length may fall short of `frames`
  std::string format;       // e.g. "WAV / WAVE (Waveform Audio) / PCM signed 16-bit little-endian"
  double duration_seconds() const { return sample_rate > 0 ? double(frames) / sample_rate : 0.0; }
};

// Sane limits: anything outside is "absurd" and rejected.
constexpr int kMinSampleRate = 1000;
constexpr int kMaxSampleRate = 768000;
constexpr int kMaxChannels = 32;

// Throws AudioError naming the file and the reason: missing, unreadable (permissions),
// a directory, not audio (no format recognised, or no audio stream), damaged
// header, 0 Hz / absurd rate, more than kMaxChannels channels, no frames
// (empty / zero length). See AudioErrorKind for which is which. `audio_stream`
// picks the audio stream (0 = the first); a missing one is an error.
AudioInfo validate_audio(const std::string& path, int audio_stream = 0);

// The same checks on a whole file held in memory (e.g. an HTTP request body),
// without temp files. `name` starts every message ("request body: ..."). An
// empty buffer is kInvalid, "empty (0 bytes)". `bytes` is only read during the call.
AudioInfo validate_audio_bytes(const std::string& name, std::string_view bytes, int audio_stream = 0);

// What AudioStream needs: the checks above, with the decoder left open
// (positioned at the first packet). A memory source's bytes must outlive it.
struct ValidatedAudio {
  AudioInfo info;
  std::unique_ptr<AudioDecoder> decoder;
};
ValidatedAudio open_validated(const AudioSource& source, int audio_stream = 0);

}  // namespace corepool
