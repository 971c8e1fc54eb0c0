// Stage 2a for raw PCM that arrives in pieces (serve's WebSocket stream):
// interleaved s16le or f32le at the client's rate and channel count in,
// mono float at the model's rate out, as AudioStream does for files
// (downmix by averaging, soxr resampling, the same sample checks). One per
// stream, used by one thread; memory is one piece.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "audio/resampler.h"

namespace corepool {

enum class PcmFormat { kS16le, kF32le };

struct PcmSpec {
  int sample_rate = 0;
  int channels = 0;
  PcmFormat format = PcmFormat::kS16le;
  int frame_bytes() const { return channels * (format == PcmFormat::kS16le ? 2 : 4); }
};

// "sample_rate=16000&channels=1&format=s16le" (any order, each once) -> a
// spec, or the reason it is not one ("sample_rate: 0 is not in 1000..384000").
// Missing keys: channels 1, format s16le; sample_rate is required.
struct PcmSpecOrError {
  std::optional<PcmSpec> spec;
  std::string error;
};
PcmSpecOrError parse_pcm_query(std::string_view query);

class PcmStream {
 public:
  // Throws std::runtime_error when soxr refuses the rates.
  PcmStream(const PcmSpec& spec, int target_rate);

  // Appends the piece's mono samples at the target rate to `out`. Returns
  // the reason when the piece is not whole frames or holds a NaN, Inf or a
  // float beyond +-1000 (nothing appended then); "" when fine.
  std::string push(std::string_view bytes, std::vector<float>& out);
  // The resampler's tail, after the last piece.
  void finish(std::vector<float>& out);

  int64_t frames_in() const { return frames_in_; }  // at the client's rate
  double seconds_in() const { return double(frames_in_) / spec_.sample_rate; }

 private:
  const PcmSpec spec_;
  Resampler resampler_;
  std::vector<float> mono_;
  int64_t frames_in_ = 0;
};

}  // namespace corepool
