// The training's lossy-codec augmentation (models/train/codec_roundtrip.h):
// every codec it draws from gives back the clip, the same length, lined up
// with it (the priming delay taken off), and audibly changed but not
// destroyed. The reference is the clip itself; a wrong delay shows as a
// signal-to-error ratio far below the aligned one.
#include "models/train/codec_roundtrip.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

namespace corepool::train {
namespace {

constexpr int kRate = 16000;

// A sweep over a tone with a tremolo, as the decoder tests use: any shift
// in time changes the waveform.
std::vector<float> clip(double seconds) {
  std::vector<float> x(size_t(seconds * kRate));
  for (size_t i = 0; i < x.size(); ++i) {
    const double t = double(i) / kRate;
    const double sweep = 300 * t + 600 * t * t / seconds;
    x[i] = float((0.6 + 0.3 * std::sin(6.2832 * 0.7 * t)) *
                 (0.5 * std::sin(6.2832 * sweep) + 0.25 * std::sin(6.2832 * 220 * t)));
  }
  return x;
}

// Signal-to-error ratio in dB of `got` against `want` shifted by `lag`
// samples (got[i] compared with want[i - lag]), over the middle of the clip.
double snr_db(const std::vector<float>& want, const std::vector<float>& got, long lag = 0) {
  double signal = 0, error = 0;
  for (size_t i = want.size() / 10; i < want.size() * 9 / 10; ++i) {
    const double w = want[size_t(long(i) - lag)];
    signal += w * w;
    error += (got[i] - w) * (got[i] - w);
  }
  return 10 * std::log10(signal / std::max(error, 1e-20));
}

TEST(CodecRoundtripTest, EveryTrainingCodecGivesBackTheClipLinedUp) {
  const std::vector<float> x = clip(2.0);
  for (const Codec& codec : training_codecs()) {
    SCOPED_TRACE(codec.encoder + " " + std::to_string(codec.bit_rate));
    std::vector<float> y;
    ASSERT_NO_THROW(y = codec_roundtrip(x, kRate, codec));
    ASSERT_EQ(y.size(), x.size());
    const double aligned = snr_db(x, y);
    // Measured (Debian 12, FFmpeg 5.1) from about 9 dB (Opus at 12 kb/s)
    // up; a codec that lost the signal or a wrong rate gives under 0 dB.
    EXPECT_GT(aligned, 5.0);
    // Lined up: 2 ms either way is far worse (a 1.5 kHz sweep moves a
    // whole cycle in under a millisecond).
    EXPECT_GT(aligned, snr_db(x, y, 32) + 3.0);
    EXPECT_GT(aligned, snr_db(x, y, -32) + 3.0);
    // Lossy: the codec changed something (a copy would be exact: 200 dB here).
    EXPECT_LT(aligned, 100.0);
    std::printf("%-10s %6d b/s: %5.1f dB aligned, %5.1f / %5.1f dB 2 ms off\n", codec.encoder.c_str(),
                codec.bit_rate, aligned, snr_db(x, y, 32), snr_db(x, y, -32));
  }
}

TEST(CodecRoundtripTest, AnUnknownEncoderIsNamed) {
  try {
    codec_roundtrip(clip(0.5), kRate, {"no-such-codec", 32000});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("codec no-such-codec at 32000 b/s: FFmpeg has no such encoder"));
  }
}

}  // namespace
}  // namespace corepool::train
