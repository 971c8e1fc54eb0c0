// Tests of the synthesiser (tools/audio_synth.h): byte-identical output for the
// same spec, what each section kind sounds like, lengths, parse_sections and
// its errors, and the damaged-file set. The fixture owns a temp dir.
#include "tools/audio_synth.h"
#include "tests/support/temp_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sndfile.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace corepool::synth {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Decoded {
  SF_INFO info{};
  std::vector<float> samples;  // interleaved
};

Decoded decode(const std::string& path) {
  Decoded d;
  SNDFILE* f = sf_open(path.c_str(), SFM_READ, &d.info);
  if (!f) return d;
  d.samples.resize(size_t(d.info.frames * d.info.channels));
  d.samples.resize(size_t(sf_readf_float(f, d.samples.data(), d.info.frames) * d.info.channels));
  sf_close(f);
  return d;
}

// Energy at `hz` relative to the signal's energy (Goertzel), ~0.5 for a pure tone.
double relative_power(const std::vector<float>& x, double hz, int rate) {
  const double w = 2 * M_PI * hz / rate;
  double s1 = 0, s2 = 0, energy = 0;
  for (float v : x) {
    const double s0 = v + 2 * std::cos(w) * s1 - s2;
    s2 = s1;
    s1 = s0;
    energy += double(v) * v;
  }
  const double power = s1 * s1 + s2 * s2 - 2 * std::cos(w) * s1 * s2;
  return power / (energy * double(x.size()) / 2);
}

int zero_crossings(const std::vector<float>& x) {
  int n = 0;
  for (size_t i = 1; i < x.size(); ++i) n += (x[i] >= 0) != (x[i - 1] >= 0);
  return n;
}

FileSpec one_section(Kind kind, double seconds, double hz, double gain = 0.5) {
  FileSpec spec;
  spec.sections = {{kind, seconds, hz, gain}};
  return spec;
}

class SynthTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return temp_ / name; }

  Decoded write_and_decode(const FileSpec& spec, const std::string& name = "x.wav") {
    write_audio(path(name), spec);
    return decode(path(name));
  }

  testing::TempDir temp_{"corepool-synth"};
};

class SynthFormatTest : public SynthTest, public ::testing::WithParamInterface<const char*> {};

// Ogg's stream serial number is random (libsndfile seeds it from the clock),
// so for ogg the promise is identical decoded audio rather than bytes.
TEST_P(SynthFormatTest, SameSpecWrittenTwiceGivesIdenticalAudio) {
  FileSpec spec = demo_spec();
  spec.format = GetParam();
  spec.channels = 2;
  write_audio(path("a"), spec);
  write_audio(path("b"), spec);
  if (spec.format != "ogg") {
    EXPECT_EQ(file_bytes(path("a")), file_bytes(path("b")));
  }
  const Decoded a = decode(path("a"));
  EXPECT_EQ(a.info.frames, 30 * 16000);
  EXPECT_EQ(a.info.channels, 2);
  EXPECT_EQ(a.samples, decode(path("b")).samples);
}

INSTANTIATE_TEST_SUITE_P(Synth, SynthFormatTest,
                         ::testing::Values("wav", "wavf", "flac", "ogg"));

TEST_F(SynthTest, DifferentSeedsGiveDifferentNoise) {
  FileSpec spec = one_section(Kind::kNoise, 0.5, 440);
  const Decoded a = write_and_decode(spec, "a.wav");
  spec.seed = 2;
  const Decoded b = write_and_decode(spec, "b.wav");
  EXPECT_NE(a.samples, b.samples);
}

TEST_F(SynthTest, ToneHasItsFrequencyAndPeakAndFadesAtTheEdges) {
  FileSpec spec = one_section(Kind::kTone, 1.0, 440, 0.5);
  spec.format = "wavf";
  const Decoded d = write_and_decode(spec);
  ASSERT_EQ(d.samples.size(), 16000u);
  EXPECT_NEAR(zero_crossings(d.samples), 880, 2);
  const float peak = *std::max_element(d.samples.begin(), d.samples.end());
  EXPECT_NEAR(peak, 0.5f, 1e-3);
  EXPECT_LT(std::fabs(d.samples[1]), 0.01f);
  EXPECT_LT(std::fabs(d.samples.back()), 0.01f);
}

TEST_F(SynthTest, ChordHoldsRootMajorThirdAndFifth) {
  FileSpec spec = one_section(Kind::kChord, 1.0, 220);
  spec.format = "wavf";
  const Decoded d = write_and_decode(spec);
  for (double hz : {220.0, 277.18, 329.63}) {  // root, major third, fifth
    EXPECT_GT(relative_power(d.samples, hz, 16000), 0.1) << hz;
  }
  for (double hz : {246.94, 440.0}) {  // the second, the octave: absent
    EXPECT_LT(relative_power(d.samples, hz, 16000), 0.01) << hz;
  }
}

TEST_F(SynthTest, NoiseIsUniformWithinTheGain) {
  FileSpec spec = one_section(Kind::kNoise, 2.0, 440, 0.4);
  spec.format = "wavf";
  const Decoded d = write_and_decode(spec);
  double sum = 0, squares = 0;
  for (float v : d.samples) {
    ASSERT_GE(v, -0.4f);
    ASSERT_LT(v, 0.4f);
    sum += v;
    squares += double(v) * v;
  }
  const double n = double(d.samples.size());
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(squares / n, 0.4 * 0.4 / 3, 0.003);  // variance of U(-a, a) is a^2/3
}

TEST_F(SynthTest, ClicksComeAtTheirRate) {
  const Decoded d = write_and_decode(one_section(Kind::kClicks, 2.0, 8));
  int onsets = 0;
  for (size_t i = 0; i < d.samples.size(); ++i) {
    onsets += d.samples[i] > 0 && (i == 0 || d.samples[i - 1] == 0);
  }
  EXPECT_EQ(onsets, 16);
}

TEST_F(SynthTest, SilenceIsAllZeros) {
  const Decoded d = write_and_decode(one_section(Kind::kSilence, 0.5, 440));
  ASSERT_EQ(d.samples.size(), 8000u);
  EXPECT_TRUE(std::all_of(d.samples.begin(), d.samples.end(), [](float v) { return v == 0; }));
}

TEST_F(SynthTest, RepeatPlaysTheTimelineAgain) {
  FileSpec spec;
  spec.sample_rate = 8000;
  spec.sections = parse_sections("tone:0.5,clicks:0.25,noise:0.25");
  spec.repeat = 3;
  EXPECT_DOUBLE_EQ(duration_seconds(spec), 3.0);
  const Decoded d = write_and_decode(spec);
  ASSERT_EQ(d.samples.size(), 24000u);
  // Tone and clicks repeat exactly; noise continues its sequence.
  EXPECT_TRUE(std::equal(d.samples.begin(), d.samples.begin() + 6000, d.samples.begin() + 8000));
  EXPECT_FALSE(std::equal(d.samples.begin() + 6000, d.samples.begin() + 8000,
                          d.samples.begin() + 14000));
}

TEST_F(SynthTest, DemoSpecIsThirtySecondsOfMono16kHz) {
  const FileSpec spec = demo_spec();
  EXPECT_EQ(spec.sample_rate, 16000);
  EXPECT_EQ(spec.channels, 1);
  EXPECT_DOUBLE_EQ(duration_seconds(spec), 30.0);
  ASSERT_EQ(spec.sections.size(), 8u);
  EXPECT_EQ(spec.sections[3].kind, Kind::kChord);
  EXPECT_EQ(spec.sections[4].kind, Kind::kClicks);
}

TEST_F(SynthTest, UnwritablePathIsReportedWithThePath) {
  const std::string bad = path("no/such/dir/x.wav");
  try {
    write_audio(bad, one_section(Kind::kTone, 0.1, 440));
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), StartsWith(bad + ": "));
  }
}

TEST_F(SynthTest, DamagedFilesAreWrittenAsDescribed) {
  const std::vector<std::string> paths = write_damaged_files(temp_.path());
  ASSERT_EQ(paths.size(), 8u);
  for (const auto& p : paths) EXPECT_TRUE(std::filesystem::exists(p)) << p;
  EXPECT_EQ(std::filesystem::file_size(path("zero_bytes.wav")), 0u);
  EXPECT_EQ(file_bytes(path("zero_rate.wav")).substr(24, 4), std::string(4, '\0'));
  EXPECT_EQ(decode(path("many_channels.wav")).info.channels, 40);
  EXPECT_EQ(decode(path("empty.wav")).info.frames, 0);
  EXPECT_EQ(decode(path("truncated.wav")).samples.size(), 4000u);
  EXPECT_TRUE(std::isnan(decode(path("nan.wav")).samples[4000]));
  EXPECT_EQ(decode(path("inf.wav")).samples[4000], INFINITY);
}

TEST(SynthParseTest, ParsesKindSecondsAndOptionalFrequency) {
  const auto s = parse_sections("tone:2,noise:1.5, silence:1 ,chord:3@220,clicks:4@8.5");
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0].kind, Kind::kTone);
  EXPECT_DOUBLE_EQ(s[0].seconds, 2);
  EXPECT_DOUBLE_EQ(s[0].frequency, 440);
  EXPECT_EQ(s[1].kind, Kind::kNoise);
  EXPECT_DOUBLE_EQ(s[1].seconds, 1.5);
  EXPECT_EQ(s[2].kind, Kind::kSilence);
  EXPECT_EQ(s[3].kind, Kind::kChord);
  EXPECT_DOUBLE_EQ(s[3].frequency, 220);
  EXPECT_EQ(s[4].kind, Kind::kClicks);
  EXPECT_DOUBLE_EQ(s[4].frequency, 8.5);
}

TEST(SynthParseTest, BadItemsAreNamedInTheError) {
  for (const std::string bad : {"beep:1", "tone", "tone:", "tone:abc", "tone:-1", "tone:0",
                                "tone:1@", "tone:1@0", "tone:1@x", "tone:1x"}) {
    try {
      parse_sections("noise:1," + bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), HasSubstr("\"" + bad + "\"")) << bad;
    }
  }
}

TEST(SynthParseTest, EmptyTextOrEmptyItemIsAnError) {
  EXPECT_THROW(parse_sections(""), std::invalid_argument);
  EXPECT_THROW(parse_sections("tone:1,,noise:1"), std::invalid_argument);
  EXPECT_THROW(parse_sections("tone:1,"), std::invalid_argument);
}

}  // namespace
}  // namespace corepool::synth
