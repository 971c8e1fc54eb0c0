// Lossy-codec augmentation for the tagger's training: a clip encoded with one
// of the codecs people's files come in (Opus, MP3, AAC) at a low bit rate and
// decoded again, in memory, with FFmpeg's libavcodec (no container, no files).
// Without it the model had only ever heard clean PCM, and the demo as Opus
// moved one synthesized-music segment to a coin toss between music and noise.
#pragma once

#include <string>
#include <vector>

namespace corepool::train {

struct Codec {
  std::string encoder;  // libavcodec encoder name: "libopus", "libmp3lame", "aac"
  int bit_rate = 0;     // bits per second
};

// `x` (mono float at `rate`) through `codec` and back: the same length and
// rate, the encoder's priming delay taken off so the result lines up with `x`
// (to within a codec frame; the tagger's labels are per second). Throws
// std::runtime_error naming the codec when FFmpeg has no such encoder, refuses
// the rate, or fails to encode or decode.
std::vector<float> codec_roundtrip(const std::vector<float>& x, int rate, const Codec& codec);

// The codecs and bit rates training draws from (speech-grade to music-grade).
const std::vector<Codec>& training_codecs();

}  // namespace corepool::train
