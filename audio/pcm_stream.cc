// PcmStream: bytes -> samples -> mono -> model rate. s16 is scaled by 1/32768
// as FFmpeg's s16 -> float conversion does, so a stream of a WAV's samples
// gives `corepool batch`'s samples for that WAV.
#include "audio/pcm_stream.h"

#include <cmath>
#include <cstring>

namespace corepool {
namespace {

constexpr float kMaxSampleMagnitude = 1000.0f;  // as AudioStream: past this the resampler may overflow

// The integer value of `text`, or nullopt when it is not all digits (or too long).
std::optional<long> to_int(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  long v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string set_key(PcmSpec& spec, std::string_view key, std::string_view value, bool& has_rate) {
  const std::string k(key), v(value);
  if (key == "format") {
    if (value == "s16le") spec.format = PcmFormat::kS16le;
    else if (value == "f32le") spec.format = PcmFormat::kF32le;
    else return "format: \"" + v + "\" is not s16le or f32le";
    return "";
  }
  const bool rate = key == "sample_rate";
  if (!rate && key != "channels") return "unknown query parameter \"" + k + "\" (sample_rate, channels, format)";
  const auto n = to_int(value);
  const long lo = rate ? 1000 : 1, hi = rate ? 384000 : 32;
  if (!n || *n < lo || *n > hi) {
    return k + ": \"" + v + "\" is not in " + std::to_string(lo) + ".." + std::to_string(hi);
  }
  (rate ? spec.sample_rate : spec.channels) = static_cast<int>(*n);
  has_rate = has_rate || rate;
  return "";
}

}  // namespace

PcmSpecOrError parse_pcm_query(std::string_view query) {
  PcmSpec spec;
  spec.channels = 1;
  bool has_rate = false;
  std::string seen = "&";
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    const std::string_view key = pair.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    if (seen.find("&" + std::string(key) + "&") != std::string::npos) {
      return {std::nullopt, std::string(key) + ": given twice"};
    }
    seen += std::string(key) + "&";
    if (std::string e = set_key(spec, key, value, has_rate); !e.empty()) return {std::nullopt, e};
  }
  if (!has_rate) return {std::nullopt, "sample_rate: missing (e.g. ?sample_rate=16000&channels=1&format=s16le)"};
  return {spec, ""};
}

PcmStream::PcmStream(const PcmSpec& spec, int target_rate)
    : spec_(spec), resampler_(spec.sample_rate, target_rate) {}

std::string PcmStream::push(std::string_view bytes, std::vector<float>& out) {
  const size_t frame = static_cast<size_t>(spec_.frame_bytes());
  if (bytes.size() % frame != 0) {
    return "a binary message of " + std::to_string(bytes.size()) + " bytes is not whole frames of " +
           std::to_string(frame) + " bytes (" + std::to_string(spec_.channels) + " channel(s) of " +
           (spec_.format == PcmFormat::kS16le ? "s16le" : "f32le") + ")";
  }
  const size_t frames = bytes.size() / frame;
  const size_t channels = static_cast<size_t>(spec_.channels);
  mono_.assign(frames, 0.0f);
  for (size_t f = 0; f < frames; ++f) {
    float sum = 0;
    for (size_t c = 0; c < channels; ++c) {
      const char* at = bytes.data() + f * frame + c * (frame / channels);
      float v;
      if (spec_.format == PcmFormat::kS16le) {
        int16_t s;
        std::memcpy(&s, at, 2);  // little-endian host (x86-64, arm64)
        v = float(s) / 32768.0f;
      } else {
        std::memcpy(&v, at, 4);
        if (!std::isfinite(v) || std::fabs(v) > kMaxSampleMagnitude) {
          return "sample " + std::to_string(frames_in_ + int64_t(f)) + " (channel " + std::to_string(c) +
                 ") is not a finite float within +-1000";
        }
      }
      sum += v;
    }
    mono_[f] = channels == 1 ? sum : sum / float(channels);
  }
  frames_in_ += int64_t(frames);
  if (resampler_.passthrough()) out.insert(out.end(), mono_.begin(), mono_.end());
  else resampler_.process(mono_.data(), mono_.size(), false, out);
  return "";
}

void PcmStream::finish(std::vector<float>& out) {
  if (!resampler_.passthrough()) resampler_.process(nullptr, 0, true, out);
}

}  // namespace corepool
