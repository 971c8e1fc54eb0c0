// Tests of AudioStream (audio/audio_stream.h): downmix, resampling, block
// independence, mid-stream errors (NaN, Inf, truncation) and a multi-hour file
// streamed through AudioStream + Segmenter in bounded memory. The fixture owns
// a temp dir (multi-hundred-MB files included) and checks for fd leaks.
#include "audio/audio_stream.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sndfile.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/sanitized.h"
#include "tests/support/scratch_dir_test.h"
#include "tests/support/proc_status.h"
#include "tools/audio_synth.h"
#include "audio/segmenter.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;


using testing::reset_peak;
using testing::status_kb;

// Sign changes, ignoring exact zeros (silence, fades).
int zero_crossings(const std::vector<float>& x) {
  int n = 0;
  float last = 0;
  for (float v : x) {
    if (v == 0) continue;
    if (last != 0 && (v > 0) != (last > 0)) ++n;
    last = v;
  }
  return n;
}

std::vector<float> read_all(AudioStream& stream) {
  std::vector<float> all;
  while (stream.read(all)) {
  }
  return all;
}

class AudioStreamTest : public corepool::testing::ScratchDirTest {
 protected:
  std::string write_tone(const std::string& name, int rate, double hz, double seconds) {
    synth::FileSpec spec;
    spec.sample_rate = rate;
    spec.sections = {{synth::Kind::kTone, seconds, hz, 0.5}};
    synth::write_audio(path(name), spec);
    return path(name);
  }

  // Reads until the stream throws; returns the message and how many reads succeeded.
  static std::string error_after_reads(AudioStream& stream, int& good_reads) {
    std::vector<float> block;
    good_reads = 0;
    try {
      while (stream.read(block)) ++good_reads;
    } catch (const AudioError& e) {
      return e.what();
    }
    return "";
  }

};

// Float WAV so the expected mono value is exact: (0.5 + -0.25) / 2.
TEST_F(AudioStreamTest, StereoIsDownmixedByAveragingTheChannels) {
  const std::string file = path("stereo.wav");
  SF_INFO sfi{};
  sfi.samplerate = 16000;
  sfi.channels = 2;
  sfi.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  SNDFILE* out = sf_open(file.c_str(), SFM_WRITE, &sfi);
  ASSERT_NE(out, nullptr);
  std::vector<float> frames;
  for (int i = 0; i < 1000; ++i) frames.insert(frames.end(), {0.5f, -0.25f});
  ASSERT_EQ(sf_writef_float(out, frames.data(), 1000), 1000);
  sf_close(out);

  AudioStream stream(file, 16000);
  const std::vector<float> mono = read_all(stream);
  ASSERT_EQ(mono.size(), 1000u);
  for (float v : mono) ASSERT_FLOAT_EQ(v, 0.125f);
}

TEST_F(AudioStreamTest, SameRateStreamReturnsTheFileSamplesUnchanged) {
  const std::string file = write_tone("tone.wav", 16000, 440, 1.0);
  std::vector<float> expected(16000);
  SF_INFO sfi{};
  SNDFILE* in = sf_open(file.c_str(), SFM_READ, &sfi);
  ASSERT_EQ(sf_readf_float(in, expected.data(), 16000), 16000);
  sf_close(in);

  AudioStream stream(file, 16000, 1000);
  EXPECT_EQ(read_all(stream), expected);
  EXPECT_EQ(stream.frames_read(), 16000);
}

TEST_F(AudioStreamTest, ResamplingFrom44100To16000KeepsLengthAndToneFrequency) {
  const std::string file = write_tone("cd.wav", 44100, 440, 2.0);
  AudioStream stream(file, 16000);
  EXPECT_EQ(stream.info().sample_rate, 44100);
  const std::vector<float> out = read_all(stream);
  EXPECT_NEAR(double(out.size()), 32000.0, 4.0);
  EXPECT_NEAR(zero_crossings(out), 2 * 440 * 2, 4);  // two per cycle
}

// A small block makes many reads, each crossing the resampler's history.
TEST_F(AudioStreamTest, BlockSizeDoesNotChangeTheOutputLength) {
  const std::string file = write_tone("cd.wav", 44100, 440, 1.0);
  AudioStream big(file, 16000);
  AudioStream small(file, 16000, 300);
  const std::vector<float> a = read_all(big);
  const std::vector<float> b = read_all(small);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4) << "at " << i;
}

TEST_F(AudioStreamTest, ReadReturnsFalseOnlyAtTheEndAndAppendsNothingThen) {
  const std::string file = write_tone("tone.wav", 8000, 440, 1.0);
  AudioStream stream(file, 8000, 3000);
  std::vector<float> out;
  int reads = 0;
  while (stream.read(out)) ++reads;
  EXPECT_EQ(reads, 3);  // 3000 + 3000 + 2000
  EXPECT_EQ(out.size(), 8000u);
  EXPECT_FALSE(stream.read(out));
  EXPECT_EQ(out.size(), 8000u);
}

TEST_F(AudioStreamTest, DamagedHeaderFailsInTheConstructor) {
  synth::write_damaged_files(dir_);
  EXPECT_THROW(AudioStream(path("zero_rate.wav"), 16000), AudioError);
  EXPECT_THROW(AudioStream(path("not_audio.wav"), 16000), AudioError);
}

TEST_F(AudioStreamTest, NanSampleThrowsMidStreamNamingItsPosition) {
  synth::write_damaged_files(dir_);
  AudioStream stream(path("nan.wav"), 8000, 1000);
  int good_reads = 0;
  const std::string message = error_after_reads(stream, good_reads);
  EXPECT_THAT(message, StartsWith(path("nan.wav") + ": "));
  EXPECT_THAT(message, HasSubstr("sample 4000 is NaN"));
  EXPECT_EQ(good_reads, 4);  // blocks before the one holding frame 4000
}

TEST_F(AudioStreamTest, InfiniteSampleThrowsMidStreamNamingItsPosition) {
  synth::write_damaged_files(dir_);
  AudioStream stream(path("inf.wav"), 16000, 1000);
  int good_reads = 0;
  const std::string message = error_after_reads(stream, good_reads);
  EXPECT_THAT(message, StartsWith(path("inf.wav") + ": "));
  EXPECT_THAT(message, HasSubstr("sample 4000 is +Inf"));
  EXPECT_GT(good_reads, 0);
}

// Found by tests/fuzz/audio_fuzz: two finite samples near FLT_MAX summed to
// +Inf in the downmix, and Inf reached the features.
TEST_F(AudioStreamTest, HugeFiniteFloatSampleIsRefusedBeforeItOverflowsTheDownmix) {
  const std::string file = path("huge.wav");
  SF_INFO sfi{};
  sfi.samplerate = 16000;
  sfi.channels = 2;
  sfi.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  SNDFILE* out = sf_open(file.c_str(), SFM_WRITE, &sfi);
  ASSERT_NE(out, nullptr);
  std::vector<float> frames(2000, 0.25f);
  frames[2 * 700] = frames[2 * 700 + 1] = 3e38f;
  ASSERT_EQ(sf_writef_float(out, frames.data(), 1000), 1000);
  sf_close(out);
  AudioStream stream(file, 16000, 500);
  int good_reads = 0;
  const std::string message = error_after_reads(stream, good_reads);
  EXPECT_THAT(message, HasSubstr("sample 700 is 3e+38, beyond +-1000"));
  EXPECT_EQ(good_reads, 1);
}

TEST_F(AudioStreamTest, TruncatedFileThrowsAfterItsLastRealBlock) {
  synth::write_damaged_files(dir_);
  AudioStream stream(path("truncated.wav"), 8000, 1000);
  int good_reads = 0;
  const std::string message = error_after_reads(stream, good_reads);
  EXPECT_THAT(message, StartsWith(path("truncated.wav") + ": "));
  EXPECT_THAT(message, HasSubstr("truncated: header says 8000 frames, read 4000"));
  EXPECT_EQ(good_reads, 4);
  EXPECT_EQ(stream.frames_read(), 4000);
}

// Damaged content is audio we cannot use, never a file system problem.
TEST_F(AudioStreamTest, MidStreamErrorsAreOfKindInvalid) {
  synth::write_damaged_files(dir_);
  for (const char* name : {"nan.wav", "inf.wav", "truncated.wav"}) {
    AudioStream stream(path(name), 16000, 1000);
    std::vector<float> block;
    try {
      while (stream.read(block)) {
      }
      ADD_FAILURE() << name << " decoded without an error";
    } catch (const AudioError& e) {
      EXPECT_EQ(int(e.kind()), int(AudioErrorKind::kInvalid)) << e.what();
    }
  }
}

// FLAC keeps its length in STREAMINFO, so the shortfall shows at the end.
TEST_F(AudioStreamTest, TruncatedFlacThrowsMidStream) {
  const std::string file = path("cut.flac");
  synth::FileSpec spec;
  spec.format = "flac";
  spec.sections = {{synth::Kind::kNoise, 10, 440, 0.3}};
  synth::write_audio(file, spec);
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);

  AudioStream stream(file, 16000, 4096);
  int good_reads = 0;
  const std::string message = error_after_reads(stream, good_reads);
  EXPECT_THAT(message, StartsWith(file + ": truncated: header says 160000 frames, read "));
  EXPECT_GT(good_reads, 5);
}

struct Streamed {
  int64_t frames = 0;
  uint64_t segments = 0;
  long peak_growth_kb = 0;
};

// The batch reader's loop: AudioStream -> Segmenter, one block at a time.
Streamed stream_through_segmenter(const std::string& file, int target_rate, size_t length,
                                  size_t hop) {
  reset_peak();
  const long rss_before = status_kb("VmRSS");
  Streamed result;
  AudioStream stream(file, target_rate);
  Segmenter segmenter(length, hop);
  std::vector<float> block;
  Segment segment;
  while (stream.read(block)) {
    segmenter.push(block.data(), block.size());
    block.clear();
    while (segmenter.next(segment)) ++result.segments;
  }
  while (segmenter.finish(segment)) ++result.segments;
  result.frames = stream.frames_read();
  result.peak_growth_kb = status_kb("VmHWM") - rss_before;
  return result;
}

// Not checked under ASan: it keeps freed blocks in quarantine (up to 256 MB)
// and FFmpeg allocates a packet at a time, so RSS measures the sanitizer there
// (all pass under ASan with quarantine_size_mb=0); the plain build checks it.
constexpr long kMemoryBoundKb = 20 * 1024;

// 3 h at 8 kHz PCM16 (~173 MB), streamed at its own rate: the long-file case.
TEST_F(AudioStreamTest, ThreeHourFileIsWrittenAndStreamedInBoundedMemory) {
  ASSERT_GT(status_kb("VmHWM"), 0) << "no /proc/self/status";
  constexpr int kRate = 8000;
  const std::string file = path("three_hours.wav");
  synth::FileSpec spec;
  spec.sample_rate = kRate;
  spec.sections = {{synth::Kind::kTone, 50, 440, 0.5}, {synth::Kind::kNoise, 10, 440, 0.2}};
  spec.repeat = 180;  // 180 minutes

  reset_peak();
  const long rss_before_write = status_kb("VmRSS");
  synth::write_audio(file, spec);
  const long write_growth = status_kb("VmHWM") - rss_before_write;
  EXPECT_LT(write_growth, kMemoryBoundKb) << "writing grew memory by " << write_growth << " kB";

  const Streamed got = stream_through_segmenter(file, kRate, kRate, kRate / 2);
  if (!corepool::testing::kSanitized) {  // see kMemoryBoundKb
    EXPECT_LT(got.peak_growth_kb, kMemoryBoundKb)
        << "streaming grew memory by " << got.peak_growth_kb << " kB";
  }
  const int64_t frames = int64_t(3) * 3600 * kRate;
  EXPECT_EQ(got.frames, frames);
  EXPECT_EQ(got.segments, uint64_t(frames / (kRate / 2) - 1));  // last hop is fully covered
  std::filesystem::remove(file);
}

// 10 min at 44.1 kHz resampled to 16 kHz: keeping the output would cost ~38 MB.
TEST_F(AudioStreamTest, ResampledLongFileStreamsInBoundedMemory) {
  const std::string file = path("ten_minutes.wav");
  synth::FileSpec spec;
  spec.sample_rate = 44100;
  spec.sections = {{synth::Kind::kChord, 30, 220, 0.5}, {synth::Kind::kNoise, 30, 440, 0.2}};
  spec.repeat = 10;
  synth::write_audio(file, spec);

  const Streamed got = stream_through_segmenter(file, 16000, 16000, 16000);
  if (!corepool::testing::kSanitized) {  // see kMemoryBoundKb
    EXPECT_LT(got.peak_growth_kb, kMemoryBoundKb)
        << "streaming grew memory by " << got.peak_growth_kb << " kB";
  }
  EXPECT_EQ(got.frames, int64_t(600) * 44100);
  EXPECT_NEAR(double(got.segments), 600.0, 1.0);  // output is 600 s +- a few samples
}

}  // namespace
}  // namespace corepool
