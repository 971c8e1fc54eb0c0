// libFuzzer target: bytes as an uploaded audio file (a /v1/audio:tag request
// body) through validate_audio_bytes and AudioStream's in-memory decoding
// (FFmpeg's demuxers and decoders over an AVIOContext on the buffer, downmix,
// resampling to 16 kHz). Bad audio must end
// in an AudioError, never a crash, a read outside the buffer, a leak or UB;
// decoded samples must be finite.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "audio/audio_error.h"
#include "audio/audio_stream.h"
#include "audio/audio_validation.h"

namespace {

// A few kilobytes of FLAC can describe minutes of audio; this many output
// samples (a minute at 16 kHz) is enough to reach every decoding path.
constexpr size_t kMaxSamples = 16000 * 60;

void decode(std::shared_ptr<const std::string> bytes) {
  corepool::AudioStream stream("request body", std::move(bytes), 16000, 4096);
  std::vector<float> block;
  size_t total = 0;
  while (total < kMaxSamples && stream.read(block)) {
    for (float v : block) {
      if (!std::isfinite(v)) corepool::fuzz::fail("AudioStream returned a non-finite sample");
    }
    total += block.size();
    block.clear();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = std::make_shared<const std::string>(reinterpret_cast<const char*>(data), size);
  try {
    const corepool::AudioInfo info = corepool::validate_audio_bytes("request body", *bytes);
    if (info.sample_rate < corepool::kMinSampleRate || info.sample_rate > corepool::kMaxSampleRate ||
        info.channels < 1 || info.channels > corepool::kMaxChannels || info.frames < 0 ||
        (info.frames_exact && info.frames < 1)) {  // 0 frames: a length the container does not state
      corepool::fuzz::fail("validate_audio_bytes accepted a header outside its limits");
    }
  } catch (const corepool::AudioError&) {
    return 0;  // refused at validation, as most random bytes are
  }
  try {
    decode(bytes);
  } catch (const corepool::AudioError&) {
    // truncated, NaN/Inf, undecodable: a clear error is the right answer
  }
  return 0;
}
