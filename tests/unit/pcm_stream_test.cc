// PcmStream and its query (audio/pcm_stream.cc): the stream endpoint's
// parameters refused with the parameter named, s16le scaled as FFmpeg scales
// it, channels averaged, float checks, pieces that are not whole frames, and
// resampling that keeps the length.
#include "audio/pcm_stream.h"

#include <cstring>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corepool {
namespace {

using ::testing::HasSubstr;

TEST(PcmStreamTest, TheQueryGivesASpecOrNamesWhatIsWrong) {
  const PcmSpecOrError ok = parse_pcm_query("format=f32le&channels=2&sample_rate=44100");
  ASSERT_TRUE(ok.spec) << ok.error;
  EXPECT_EQ(ok.spec->sample_rate, 44100);
  EXPECT_EQ(ok.spec->channels, 2);
  EXPECT_EQ(ok.spec->format, PcmFormat::kF32le);
  EXPECT_EQ(ok.spec->frame_bytes(), 8);
  const PcmSpecOrError defaults = parse_pcm_query("sample_rate=16000");
  ASSERT_TRUE(defaults.spec);
  EXPECT_EQ(defaults.spec->channels, 1);
  EXPECT_EQ(defaults.spec->format, PcmFormat::kS16le);
  for (const auto& [query, says] : std::vector<std::pair<const char*, const char*>>{
           {"", "sample_rate: missing"},
           {"channels=1", "sample_rate: missing"},
           {"sample_rate=999", "sample_rate: \"999\" is not in 1000..384000"},
           {"sample_rate=16k", "sample_rate: \"16k\""},
           {"sample_rate=16000&channels=0", "channels: \"0\" is not in 1..32"},
           {"sample_rate=16000&format=mp3", "format: \"mp3\" is not s16le or f32le"},
           {"sample_rate=16000&sample_rate=8000", "sample_rate: given twice"},
           {"sample_rate=16000&rate=1", "unknown query parameter \"rate\""},
       }) {
    const PcmSpecOrError bad = parse_pcm_query(query);
    EXPECT_FALSE(bad.spec) << query;
    EXPECT_THAT(bad.error, HasSubstr(says)) << query;
  }
}

std::string s16(std::initializer_list<int16_t> samples) {
  std::string bytes(samples.size() * 2, '\0');
  size_t i = 0;
  for (int16_t s : samples) std::memcpy(&bytes[2 * i++], &s, 2);
  return bytes;
}

TEST(PcmStreamTest, S16IsScaledAndChannelsAreAveraged) {
  PcmStream mono({16000, 1, PcmFormat::kS16le}, 16000);
  std::vector<float> out;
  EXPECT_EQ(mono.push(s16({16384, -32768, 0}), out), "");
  EXPECT_EQ(out, (std::vector<float>{0.5f, -1.0f, 0.0f}));
  PcmStream stereo({16000, 2, PcmFormat::kS16le}, 16000);
  out.clear();
  EXPECT_EQ(stereo.push(s16({16384, 0, -16384, -16384}), out), "");
  EXPECT_EQ(out, (std::vector<float>{0.25f, -0.5f}));
  EXPECT_DOUBLE_EQ(stereo.seconds_in(), 2.0 / 16000);
}

TEST(PcmStreamTest, PiecesThatAreNotWholeFramesOrNotFiniteAreRefused) {
  PcmStream stereo({16000, 2, PcmFormat::kS16le}, 16000);
  std::vector<float> out;
  EXPECT_THAT(stereo.push(std::string(6, '\0'), out), HasSubstr("6 bytes is not whole frames of 4 bytes"));
  PcmStream floats({16000, 1, PcmFormat::kF32le}, 16000);
  const float bad[2] = {0.5f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_THAT(floats.push(std::string(reinterpret_cast<const char*>(bad), 8), out), HasSubstr("sample 1"));
  EXPECT_TRUE(out.empty());
}

TEST(PcmStreamTest, ResamplingKeepsTheDuration) {
  PcmStream stream({44100, 1, PcmFormat::kF32le}, 16000);
  std::vector<float> out;
  const std::vector<float> second(44100, 0.25f);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(stream.push(std::string(reinterpret_cast<const char*>(second.data()), second.size() * 4), out), "");
  }
  stream.finish(out);
  EXPECT_NEAR(double(out.size()), 3 * 16000.0, 2);
  EXPECT_NEAR(out[out.size() / 2], 0.25f, 1e-3);
}

}  // namespace
}  // namespace corepool
