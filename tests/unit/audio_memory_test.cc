// Tests of audio files decoded from memory (validate_audio_bytes and AudioStream
// over a buffer: serve's request bodies): the same info and bitwise the same
// samples as the same bytes on disk, every error with its kind and the buffer's
// name, no crash or hang on damaged bytes, bounded memory for a long file.
// The fixture owns a temp dir for the on-disk twins and checks for fd leaks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sndfile.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support/sanitized.h"
#include "tests/support/scratch_dir_test.h"
#include "tests/support/proc_status.h"
#include "tools/audio_synth.h"
#include "audio/audio_stream.h"
#include "audio/audio_validation.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kName[] = "request body";
constexpr int kModelRate = 16000;

std::string slurp(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Writes a fresh file: rewriting one in place (O_TRUNC) makes ext4 flush it to
// disk on close (auto_da_alloc), which would make the loops below I/O-bound.
void spill(const std::string& file, const std::string& bytes) {
  std::filesystem::remove(file);
  std::ofstream(file, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

std::shared_ptr<const std::string> shared(std::string bytes) {
  return std::make_shared<const std::string>(std::move(bytes));
}

// What validating and decoding one input gave: the samples, or the error.
struct Outcome {
  bool ok = false;
  AudioInfo info;
  std::vector<float> samples;
  AudioErrorKind kind = AudioErrorKind::kInvalid;
  std::string message;  // the whole AudioError message
  std::string reason;   // the message after "<name>: "
};

// Far more reads than any test input can fill: more means a loop.
constexpr int kMaxReads = 100000;

// Validates, then streams to kModelRate (AudioStream does both). Only
// AudioError is expected: anything else, or a read() that never ends, fails
// the calling test (a crash fails the whole binary).
template <typename MakeStream>
Outcome decode(const std::string& name, MakeStream make_stream) {
  Outcome o;
  try {
    std::unique_ptr<AudioStream> stream = make_stream();
    o.info = stream->info();
    for (int reads = 0; stream->read(o.samples); ++reads) {
      if (reads == kMaxReads) {
        ADD_FAILURE() << name << ": read() has not ended after " << reads << " reads";
        return o;
      }
    }
    o.ok = true;
  } catch (const AudioError& e) {
    o.kind = e.kind();
    o.message = e.what();
    if (o.message.rfind(name + ": ", 0) == 0) o.reason = o.message.substr(name.size() + 2);
  } catch (const std::exception& e) {
    ADD_FAILURE() << name << ": threw something else than AudioError: " << e.what();
    o.message = e.what();
  }
  return o;
}

Outcome decode_file(const std::string& file, size_t block = 4096) {
  return decode(file, [&] { return std::make_unique<AudioStream>(file, kModelRate, block); });
}

Outcome decode_bytes(const std::string& bytes, size_t block = 4096) {
  return decode(kName, [&] {
    return std::make_unique<AudioStream>(kName, shared(bytes), kModelRate, block);
  });
}

// The error of validate_audio_bytes alone ("" and kInvalid if it passed).
Outcome validate_bytes(std::string_view bytes) {
  Outcome o;
  try {
    o.info = validate_audio_bytes(kName, bytes);
    o.ok = true;
  } catch (const AudioError& e) {
    o.kind = e.kind();
    o.message = e.what();
  }
  return o;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  // Empty vectors may hold null data(), which memcmp must not get (UBSan).
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

void expect_same_info(const AudioInfo& a, const AudioInfo& b) {
  EXPECT_EQ(a.sample_rate, b.sample_rate);
  EXPECT_EQ(a.channels, b.channels);
  EXPECT_EQ(a.frames, b.frames);
  EXPECT_EQ(a.format, b.format);
}

void expect_error(const Outcome& o, AudioErrorKind kind, const std::string& reason) {
  EXPECT_FALSE(o.ok) << "decoded " << o.samples.size() << " samples";
  EXPECT_EQ(int(o.kind), int(kind)) << o.message;
  EXPECT_THAT(o.message, StartsWith(std::string(kName) + ": "));
  EXPECT_THAT(o.message, HasSubstr(reason));
  EXPECT_THAT(o.message, Not(HasSubstr("\n")));
}

class AudioMemoryTest : public corepool::testing::ScratchDirTest {
 protected:
  std::string synth_bytes(const std::string& name, const synth::FileSpec& spec) {
    synth::write_audio(path(name), spec);
    return slurp(path(name));
  }

  // The bytes of one of synth::write_damaged_files, read back from disk.
  std::string damaged_bytes(const std::string& name) {
    if (!damaged_written_) synth::write_damaged_files(dir_);
    damaged_written_ = true;
    return slurp(path(name));
  }

  bool damaged_written_ = false;
};

// ---- Same result as on disk ------------------------------------------------

struct FormatCase {
  const char* format;  // synth::FileSpec::format
  const char* name_part;
};

class AudioMemoryFormatTest : public AudioMemoryTest,
                              public ::testing::WithParamInterface<FormatCase> {};

// Stereo at 22.05 kHz: the downmix and the resampler both run, over many blocks.
TEST_P(AudioMemoryFormatTest, BufferGivesTheSameInfoAndSamplesAsTheFileOnDisk) {
  synth::FileSpec spec;
  spec.sample_rate = 22050;
  spec.channels = 2;
  spec.format = GetParam().format;
  spec.sections = {{synth::Kind::kTone, 1.0, 440, 0.5}, {synth::Kind::kNoise, 0.5, 440, 0.2}};
  const std::string file = path(std::string("good.") + GetParam().format);
  const std::string bytes = synth_bytes(std::string("good.") + GetParam().format, spec);

  const AudioInfo from_bytes = validate_audio_bytes(kName, bytes);
  expect_same_info(from_bytes, validate_audio(file));
  EXPECT_EQ(from_bytes.frames, 33075);
  EXPECT_THAT(from_bytes.format, HasSubstr(GetParam().name_part));

  const Outcome on_disk = decode_file(file, 1000);
  const Outcome in_memory = decode_bytes(bytes, 1000);
  ASSERT_TRUE(on_disk.ok) << on_disk.message;
  ASSERT_TRUE(in_memory.ok) << in_memory.message;
  expect_same_info(in_memory.info, on_disk.info);
  EXPECT_NEAR(double(in_memory.samples.size()), 24000.0, 4.0);
  EXPECT_TRUE(same_bits(in_memory.samples, on_disk.samples))
      << in_memory.samples.size() << " vs " << on_disk.samples.size() << " samples";
}

INSTANTIATE_TEST_SUITE_P(AudioMemory, AudioMemoryFormatTest,
                         ::testing::Values(FormatCase{"wav", "PCM signed 16-bit"},
                                           FormatCase{"wavf", "PCM 32-bit floating point"},
                                           FormatCase{"flac", "FLAC"},
                                           FormatCase{"ogg", "Vorbis"}),
                         [](const auto& info) { return std::string(info.param.format); });

// Opus is written here directly: synth has no Opus writer.
TEST_F(AudioMemoryTest, OpusBufferGivesTheSameSamplesAsTheFileOnDisk) {
  const std::string file = path("good.opus");
  SF_INFO sfi{};
  sfi.samplerate = 48000;
  sfi.channels = 1;
  sfi.format = SF_FORMAT_OGG | SF_FORMAT_OPUS;
  SNDFILE* out = sf_open(file.c_str(), SFM_WRITE, &sfi);
  ASSERT_NE(out, nullptr) << sf_strerror(nullptr);
  std::vector<float> tone(48000);
  for (size_t i = 0; i < tone.size(); ++i) tone[i] = 0.5f * float(std::sin(0.0576 * double(i)));
  EXPECT_EQ(sf_writef_float(out, tone.data(), sf_count_t(tone.size())), sf_count_t(tone.size()));
  sf_close(out);

  const Outcome on_disk = decode_file(file);
  const Outcome in_memory = decode_bytes(slurp(file));
  ASSERT_TRUE(on_disk.ok) << on_disk.message;
  ASSERT_TRUE(in_memory.ok) << in_memory.message;
  expect_same_info(in_memory.info, on_disk.info);
  EXPECT_THAT(in_memory.info.format, HasSubstr("Opus"));
  EXPECT_NEAR(double(in_memory.samples.size()), 16000.0, 4.0);
  EXPECT_TRUE(same_bits(in_memory.samples, on_disk.samples));
}

// ---- Errors: kind, name, reason -------------------------------------------

TEST_F(AudioMemoryTest, EmptyBodyIsInvalidAndSaysEmpty) {
  const Outcome validated = validate_bytes("");
  EXPECT_EQ(validated.message, std::string(kName) + ": empty (0 bytes)");
  EXPECT_EQ(int(validated.kind), int(AudioErrorKind::kInvalid));
  expect_error(decode_bytes(""), AudioErrorKind::kInvalid, "empty (0 bytes)");
}

TEST_F(AudioMemoryTest, RandomBytesAreNotAudio) {
  std::mt19937 rng(7);
  std::string bytes(4096, '\0');
  for (char& c : bytes) c = char(rng() & 0xFF);
  expect_error(decode_bytes(bytes), AudioErrorKind::kNotAudio, "not an audio file (");
}

TEST_F(AudioMemoryTest, TextIsNotAudioAndSaysNoFormatWasRecognised) {
  const std::string text = "{\"audio\": \"base64 would go here\"}\n";
  const Outcome o = decode_bytes(text);
  expect_error(o, AudioErrorKind::kNotAudio, "not an audio file (format not recognised");
  EXPECT_EQ(validate_bytes(text).message, o.message);
}

TEST_F(AudioMemoryTest, JpegIsNotAudio) {
  std::string jpeg("\xFF\xD8\xFF\xE0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00", 20);
  jpeg += std::string(2000, '\x55') + "\xFF\xD9";
  expect_error(decode_bytes(jpeg), AudioErrorKind::kNotAudio, "not an audio file (");
}

struct DamagedCase {
  const char* file;  // from synth::write_damaged_files
  AudioErrorKind kind;
  const char* reason;
};

class AudioMemoryDamagedTest : public AudioMemoryTest,
                               public ::testing::WithParamInterface<DamagedCase> {};

// Each damage gives the same kind and reason from memory as from the file.
TEST_P(AudioMemoryDamagedTest, FailsWithItsKindAndReasonAsOnDisk) {
  const std::string bytes = damaged_bytes(GetParam().file);
  const Outcome in_memory = decode_bytes(bytes, 1000);
  expect_error(in_memory, GetParam().kind, GetParam().reason);
  const Outcome on_disk = decode_file(path(GetParam().file), 1000);
  EXPECT_EQ(in_memory.reason, on_disk.reason);
  EXPECT_EQ(int(in_memory.kind), int(on_disk.kind));
}

INSTANTIATE_TEST_SUITE_P(
    AudioMemory, AudioMemoryDamagedTest,
    ::testing::Values(
        DamagedCase{"not_audio.wav", AudioErrorKind::kNotAudio, "not an audio file (format not recognised)"},
        DamagedCase{"empty.wav", AudioErrorKind::kInvalid, "no audio frames (empty)"},
        DamagedCase{"zero_rate.wav", AudioErrorKind::kInvalid, "sample rate is 0 Hz"},
        DamagedCase{"many_channels.wav", AudioErrorKind::kInvalid,
                    "40 channels (at most 32 supported)"},
        DamagedCase{"truncated.wav", AudioErrorKind::kInvalid,
                    "truncated: header says 8000 frames, read 4000"},
        DamagedCase{"nan.wav", AudioErrorKind::kInvalid, "sample 4000 is NaN"},
        DamagedCase{"inf.wav", AudioErrorKind::kInvalid, "sample 4000 is +Inf"}),
    [](const auto& info) {
      std::string name = info.param.file;
      return name.substr(0, name.find('.'));
    });

// A truncated WAV passes validation (its header is whole) with the frames the
// header claims; the stream then fails after the last real block.
TEST_F(AudioMemoryTest, TruncatedWavValidatesButFailsAfterItsLastRealBlock) {
  const auto bytes = shared(damaged_bytes("truncated.wav"));
  EXPECT_EQ(validate_audio_bytes(kName, *bytes).frames, 8000);
  AudioStream stream(kName, bytes, 8000, 1000);
  std::vector<float> out;
  int good_reads = 0;
  try {
    while (stream.read(out)) ++good_reads;
    ADD_FAILURE() << "no error";
  } catch (const AudioError& e) {
    EXPECT_EQ(int(e.kind()), int(AudioErrorKind::kInvalid));
    EXPECT_EQ(std::string(e.what()),
              std::string(kName) + ": truncated: header says 8000 frames, read 4000");
  }
  EXPECT_EQ(good_reads, 4);
  EXPECT_EQ(out.size(), 4000u);
}

TEST_F(AudioMemoryTest, NanSampleNamesItsPositionInTheFile) {
  const auto bytes = shared(damaged_bytes("nan.wav"));
  EXPECT_TRUE(validate_bytes(*bytes).ok) << "NaN is only visible while decoding";
  const Outcome o =
      decode(kName, [&] { return std::make_unique<AudioStream>(kName, bytes, 8000, 999); });
  expect_error(o, AudioErrorKind::kInvalid, "sample 4000 is NaN");
}

TEST_F(AudioMemoryTest, AbsurdSampleRateIsInvalid) {
  synth::FileSpec spec;
  spec.sample_rate = 200;
  spec.sections = {{synth::Kind::kTone, 1, 50, 0.5}};
  expect_error(decode_bytes(synth_bytes("slow.wav", spec)), AudioErrorKind::kInvalid,
               "sample rate 200 Hz is outside 1000..768000 Hz");
}

// Vorbis cut in half: no last page, so no length.
TEST_F(AudioMemoryTest, OggWithoutItsEndIsInvalid) {
  synth::FileSpec spec;
  spec.format = "ogg";
  spec.sections = {{synth::Kind::kNoise, 5, 440, 0.3}};
  std::string bytes = synth_bytes("whole.ogg", spec);
  bytes.resize(bytes.size() / 2);
  expect_error(decode_bytes(bytes), AudioErrorKind::kInvalid, "truncated");
}

TEST_F(AudioMemoryTest, FlacCutInHalfIsInvalidAsTruncated) {
  synth::FileSpec spec;
  spec.format = "flac";
  spec.sections = {{synth::Kind::kNoise, 10, 440, 0.3}};
  std::string bytes = synth_bytes("whole.flac", spec);
  bytes.resize(bytes.size() / 2);
  const Outcome o = decode_bytes(bytes);
  expect_error(o, AudioErrorKind::kInvalid, "truncated: header says 160000 frames, read ");
  EXPECT_GT(o.samples.size(), 16000u * 3) << "the blocks before the cut were decoded";
}

// ---- Damaged bytes: an AudioError or audio, nothing else --------------------

// A small stereo file at 8 kHz (resampled to 16 kHz when decoded): 0.7-3 kB.
synth::FileSpec small_spec(const char* format) {
  synth::FileSpec spec;
  spec.sample_rate = 8000;
  spec.channels = 2;
  spec.format = format;
  spec.sections = {{synth::Kind::kTone, 0.02, 440, 0.5}, {synth::Kind::kNoise, 0.02, 440, 0.3}};
  return spec;
}

struct Tally {
  int decoded = 0;
  int rejected = 0;

  // Counts `o`; a rejection must name the buffer.
  void add(const Outcome& o) {
    if (o.ok) {
      ++decoded;
      return;
    }
    ++rejected;
    EXPECT_THAT(o.message, StartsWith(std::string(kName) + ": "));
  }
};

class AudioMemoryDamageTest : public AudioMemoryTest,
                              public ::testing::WithParamInterface<const char*> {
 protected:
  std::string small_bytes() { return synth_bytes("small", small_spec(GetParam())); }
};

// Every prefix, and the same prefix from a file: one code path, one outcome.
TEST_P(AudioMemoryDamageTest, EveryTruncationDecodesOrThrowsAudioErrorAsOnDisk) {
  const std::string bytes = small_bytes();
  Tally tally;
  const std::string twin = path("prefix");
  for (size_t n = 0; n <= bytes.size(); ++n) {
    SCOPED_TRACE("first " + std::to_string(n) + " of " + std::to_string(bytes.size()) + " bytes");
    const std::string prefix = bytes.substr(0, n);
    const Outcome in_memory = decode_bytes(prefix, 256);
    tally.add(in_memory);
    if (n == 0) continue;  // "empty (0 bytes)" vs "empty file (0 bytes)"
    spill(twin, prefix);
    const Outcome on_disk = decode_file(twin, 256);
    ASSERT_EQ(in_memory.ok, on_disk.ok) << in_memory.message << on_disk.message;
    ASSERT_EQ(in_memory.reason, on_disk.reason);
    ASSERT_EQ(int(in_memory.kind), int(on_disk.kind));
    ASSERT_TRUE(same_bits(in_memory.samples, on_disk.samples));
  }
  EXPECT_EQ(tally.decoded + tally.rejected, int(bytes.size()) + 1);
  EXPECT_GE(tally.decoded, 1) << "the whole file must decode";
  EXPECT_GT(tally.rejected, int(bytes.size()) / 2) << "most prefixes are truncated files";
}

// Each of the first 256 bytes (every header field, and the first frames) replaced
// by values that break lengths, counts and magic numbers in different ways.
TEST_P(AudioMemoryDamageTest, EverySingleByteCorruptionOfTheHeaderDecodesOrThrowsAudioError) {
  const std::string bytes = small_bytes();
  ASSERT_GT(bytes.size(), 256u);
  Tally tally;
  for (size_t at = 0; at < 256; ++at) {
    const unsigned char was = static_cast<unsigned char>(bytes[at]);
    const unsigned char values[] = {
        static_cast<unsigned char>(was ^ 0xFF), static_cast<unsigned char>(was ^ 0x80),
        static_cast<unsigned char>(was + 1),    static_cast<unsigned char>(was - 1),
        0x00, 0x7F, 0xFF};
    for (unsigned char value : values) {
      if (value == was) continue;
      SCOPED_TRACE("byte " + std::to_string(at) + " = " + std::to_string(value));
      std::string damaged = bytes;
      damaged[at] = char(value);
      tally.add(decode_bytes(damaged, 256));
    }
  }
  // Ogg pages carry a CRC, so there every change is caught (as an AudioError).
  if (std::string(GetParam()) != "ogg") {
    EXPECT_GT(tally.decoded, 0);
  }
  EXPECT_GT(tally.rejected, 0);
}

INSTANTIATE_TEST_SUITE_P(AudioMemory, AudioMemoryDamageTest,
                         ::testing::Values("wav", "flac", "ogg"),
                         [](const auto& info) { return std::string(info.param); });

// ---- Ownership and memory --------------------------------------------------

TEST_F(AudioMemoryTest, StreamKeepsTheBufferAliveAfterTheCallerDropsIt) {
  const std::string bytes = synth_bytes("tone.flac", small_spec("flac"));
  auto body = shared(bytes);
  const std::weak_ptr<const std::string> watch = body;
  AudioStream stream(kName, std::move(body), kModelRate, 64);
  EXPECT_FALSE(watch.expired());
  std::vector<float> out;
  while (stream.read(out)) {
  }
  EXPECT_TRUE(same_bits(out, decode_bytes(bytes, 64).samples));
}

TEST_F(AudioMemoryTest, NullBufferIsRejectedAsAProgrammingError) {
  EXPECT_THROW(AudioStream(kName, nullptr, kModelRate), std::invalid_argument);
}

using testing::reset_peak;
using testing::status_kb;

// 30 min at 8 kHz PCM16: a 28.8 MB body. Decoding it whole would cost 57.6 MB
// of floats and a copy of the body 28.8 MB; streaming costs a block.
TEST_F(AudioMemoryTest, LongBufferStreamsInBoundedMemory) {
  ASSERT_GT(status_kb("VmHWM"), 0) << "no /proc/self/status";
  synth::FileSpec spec;
  spec.sample_rate = 8000;
  spec.sections = {{synth::Kind::kTone, 50, 440, 0.5}, {synth::Kind::kNoise, 10, 440, 0.2}};
  spec.repeat = 30;
  auto body = shared(synth_bytes("half_hour.wav", spec));
  std::filesystem::remove(path("half_hour.wav"));
  ASSERT_EQ(body->size(), 44u + 2u * 8000 * 1800);

  reset_peak();
  const long rss_before = status_kb("VmRSS");
  AudioStream stream(kName, body, 8000);
  std::vector<float> block;
  int64_t samples = 0;
  while (stream.read(block)) {
    samples += int64_t(block.size());
    block.clear();
  }
  const long growth_kb = status_kb("VmHWM") - rss_before;
  EXPECT_EQ(samples, int64_t(8000) * 1800);
  // ASan keeps freed blocks in quarantine (up to 256 MB) and FFmpeg allocates
  // a packet at a time, so under ASan RSS measures the sanitizer: the plain
  // build checks the bound (all pass under ASan with quarantine_size_mb=0).
  if (!corepool::testing::kSanitized) {
    EXPECT_LT(growth_kb, 20 * 1024) << "streaming grew memory by " << growth_kb << " kB";
  }
}

}  // namespace
}  // namespace corepool
