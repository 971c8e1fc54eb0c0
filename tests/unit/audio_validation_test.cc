// Tests of validate_audio (audio/audio_validation.h): every header-level
// problem gets a one-line AudioError that starts with the path and names the
// reason and has its kind; good files of every format report their rate,
// channels and frames. (The same checks on a buffer: audio_memory_test.cc.)
// The fixture owns a temp dir and checks that no file descriptor leaks.
#include "audio/audio_validation.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>
#include <string>

#include "audio/audio_stream.h"
#include "tests/support/scratch_dir_test.h"
#include "tools/audio_synth.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;


class AudioValidationTest : public corepool::testing::ScratchDirTest {
 protected:
  std::string damaged(const std::string& name) {
    if (damaged_.empty()) damaged_ = synth::write_damaged_files(dir_);
    return path(name);
  }

  // The AudioError message for `file`, or "" if validation passed.
  static std::string error_of(const std::string& file) {
    try {
      validate_audio(file);
    } catch (const AudioError& e) {
      return e.what();
    }
    return "";
  }

  // The AudioError kind for `file`; a failure if validation passed.
  static AudioErrorKind kind_of(const std::string& file) {
    try {
      validate_audio(file);
    } catch (const AudioError& e) {
      return e.kind();
    }
    ADD_FAILURE() << file << " passed validation";
    return AudioErrorKind::kInvalid;
  }

  std::vector<std::string> damaged_;
};

// Every message: the path first, one line, and the expected reason.
void expect_reason(const std::string& message, const std::string& file, const std::string& reason) {
  EXPECT_THAT(message, StartsWith(file + ": "));
  EXPECT_THAT(message, HasSubstr(reason));
  EXPECT_THAT(message, Not(HasSubstr("\n")));
}

TEST_F(AudioValidationTest, MissingFileIsReportedAsNoSuchFile) {
  const std::string file = path("nope.wav");
  expect_reason(error_of(file), file, "no such file");
}

TEST_F(AudioValidationTest, DirectoryIsReportedAsADirectory) {
  expect_reason(error_of(dir_), dir_, "is a directory");
}

// Root reads anything, so the check runs in a child that drops to nobody.
TEST_F(AudioValidationTest, UnreadableFileIsReportedAsPermissionDenied) {
  const std::string file = path("secret.wav");
  synth::FileSpec spec;
  spec.sections = {{synth::Kind::kTone, 0.1, 440, 0.5}};
  synth::write_audio(file, spec);
  ASSERT_EQ(chmod(file.c_str(), 0), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (geteuid() == 0 && setuid(65534) != 0) _exit(3);
    const std::string message = error_of(file);
    const bool ok = message.rfind(file + ": ", 0) == 0 &&
                    message.find("permission denied") != std::string::npos &&
                    kind_of(file) == AudioErrorKind::kIo;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "child saw no 'permission denied' of kind kIo (3: setuid failed)";
}

TEST_F(AudioValidationTest, TextFileIsNotAudioAndSaysNoFormatWasRecognised) {
  const std::string file = damaged("not_audio.wav");
  const std::string message = error_of(file);
  expect_reason(message, file, "not an audio file");
  EXPECT_THAT(message, HasSubstr("(format not recognised"));
}

TEST_F(AudioValidationTest, ZeroByteFileIsReportedAsEmpty) {
  const std::string file = damaged("zero_bytes.wav");
  expect_reason(error_of(file), file, "empty file (0 bytes)");
}

TEST_F(AudioValidationTest, HeaderWithoutFramesIsReportedAsEmpty) {
  const std::string file = damaged("empty.wav");
  expect_reason(error_of(file), file, "no audio frames");
}

TEST_F(AudioValidationTest, ZeroSampleRateIsNamedAsZeroHertz) {
  const std::string file = damaged("zero_rate.wav");
  expect_reason(error_of(file), file, "sample rate is 0 Hz");
}

TEST_F(AudioValidationTest, AbsurdSampleRateIsRejected) {
  const std::string file = path("slow.wav");
  synth::FileSpec spec;
  spec.sample_rate = 200;
  spec.sections = {{synth::Kind::kTone, 1, 50, 0.5}};
  synth::write_audio(file, spec);
  expect_reason(error_of(file), file, "sample rate 200 Hz is outside 1000..768000 Hz");
}

TEST_F(AudioValidationTest, FortyChannelsAreMoreThanSupported) {
  const std::string file = damaged("many_channels.wav");
  expect_reason(error_of(file), file, "40 channels (at most 32 supported)");
}

// Vorbis cut in half: its last page is cut short.
TEST_F(AudioValidationTest, OggWithoutItsEndIsRejectedAsTruncated) {
  const std::string whole = path("whole.ogg");
  synth::FileSpec spec;
  spec.format = "ogg";
  spec.sections = {{synth::Kind::kNoise, 5, 440, 0.3}};
  synth::write_audio(whole, spec);
  const std::string cut = path("cut.ogg");
  std::filesystem::copy_file(whole, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(whole) / 2);
  expect_reason(error_of(cut), cut, "truncated");
}

// The Ogg page checksum (CRC-32, polynomial 0x04C11DB7, not reflected, over
// the page with its checksum field zeroed), written from RFC 3533 here.
uint32_t ogg_crc(const std::string& page) {
  uint32_t crc = 0;
  for (unsigned char byte : page) {
    crc ^= uint32_t(byte) << 24;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 0x80000000u) ? (crc << 1) ^ 0x04C11DB7u : crc << 1;
  }
  return crc;
}

// A whole Ogg whose last page lacks the end-of-stream flag (as 548 of
// klettres-data's recordings do) is read to its end, not called truncated.
TEST_F(AudioValidationTest, OggWithoutTheEndOfStreamFlagIsWholeIfItsLastPageIs) {
  const std::string whole = path("whole.ogg");
  synth::FileSpec spec;
  spec.format = "ogg";
  spec.sections = {{synth::Kind::kNoise, 5, 440, 0.3}};
  synth::write_audio(whole, spec);
  std::ifstream in(whole, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t last = bytes.rfind("OggS");
  ASSERT_NE(last, std::string::npos);
  ASSERT_TRUE(bytes[last + 5] & 0x04) << "the writer flags its last page end-of-stream";
  bytes[last + 5] = char(bytes[last + 5] & ~0x04);
  for (int i = 22; i < 26; ++i) bytes[last + size_t(i)] = 0;
  const uint32_t crc = ogg_crc(bytes.substr(last));
  for (int i = 0; i < 4; ++i) bytes[last + 22 + size_t(i)] = char((crc >> (8 * i)) & 0xFF);
  const std::string unflagged = path("unflagged.ogg");
  std::ofstream(unflagged, std::ios::binary) << bytes;

  EXPECT_EQ(error_of(unflagged), "");
  AudioStream stream(unflagged, 16000);
  std::vector<float> got;
  while (stream.read(got)) {
  }
  EXPECT_NEAR(double(got.size()) / 16000, 5.0, 0.05);
}

// The kind is what serve maps to a status: the file system (kIo), not audio at
// all (kNotAudio, 415), audio we cannot use (kInvalid, 400).
TEST_F(AudioValidationTest, EachProblemHasItsKind) {
  damaged("not_audio.wav");
  const std::string slow = path("slow.wav");
  synth::FileSpec spec;
  spec.sample_rate = 200;
  spec.sections = {{synth::Kind::kTone, 1, 50, 0.5}};
  synth::write_audio(slow, spec);
  const struct {
    std::string file;
    AudioErrorKind kind;
  } cases[] = {
      {path("nope.wav"), AudioErrorKind::kIo},
      {dir_, AudioErrorKind::kIo},
      {path("not_audio.wav"), AudioErrorKind::kNotAudio},
      {path("zero_bytes.wav"), AudioErrorKind::kInvalid},
      {path("empty.wav"), AudioErrorKind::kInvalid},
      {path("zero_rate.wav"), AudioErrorKind::kInvalid},
      {path("many_channels.wav"), AudioErrorKind::kInvalid},
      {slow, AudioErrorKind::kInvalid},
  };
  for (const auto& c : cases) EXPECT_EQ(int(kind_of(c.file)), int(c.kind)) << c.file;
}

TEST(AudioErrorTest, KindDefaultsToInvalidAndTheMessageStartsWithTheName) {
  const AudioError plain("x.wav", "sample 3 is NaN");
  EXPECT_STREQ(plain.what(), "x.wav: sample 3 is NaN");
  EXPECT_EQ(int(plain.kind()), int(AudioErrorKind::kInvalid));
  EXPECT_EQ(int(AudioError("x.wav", "no such file", AudioErrorKind::kIo).kind()),
            int(AudioErrorKind::kIo));
}

// NaN/Inf and missing data are only visible while decoding: AudioStream's job.
TEST_F(AudioValidationTest, ContentDamageIsLeftToTheStream) {
  EXPECT_EQ(error_of(damaged("nan.wav")), "");
  EXPECT_EQ(error_of(damaged("inf.wav")), "");
  const AudioInfo truncated = validate_audio(damaged("truncated.wav"));
  EXPECT_EQ(truncated.frames, 8000) << "frames must be what the header says, not what is left";
}

struct FormatCase {
  const char* format;
  const char* name_part;  // in AudioInfo::format
};

class AudioValidationFormatTest : public AudioValidationTest,
                                  public ::testing::WithParamInterface<FormatCase> {};

TEST_P(AudioValidationFormatTest, GoodFileReportsItsRateChannelsAndFrames) {
  const std::string file = path(std::string("good.") + GetParam().format);
  synth::FileSpec spec;
  spec.sample_rate = 22050;
  spec.channels = 2;
  spec.format = GetParam().format;
  spec.sections = {{synth::Kind::kTone, 1.0, 440, 0.5}, {synth::Kind::kNoise, 0.5, 440, 0.2}};
  synth::write_audio(file, spec);

  const AudioInfo info = validate_audio(file);
  EXPECT_EQ(info.sample_rate, 22050);
  EXPECT_EQ(info.channels, 2);
  EXPECT_EQ(info.frames, 33075);
  EXPECT_NEAR(info.duration_seconds(), 1.5, 1e-9);
  EXPECT_THAT(info.format, HasSubstr(GetParam().name_part));
}

INSTANTIATE_TEST_SUITE_P(AudioValidation, AudioValidationFormatTest,
                         ::testing::Values(FormatCase{"wav", "PCM signed 16-bit"},
                                           FormatCase{"wavf", "PCM 32-bit floating point"},
                                           FormatCase{"flac", "FLAC"},
                                           FormatCase{"ogg", "Vorbis"}),
                         [](const auto& info) { return std::string(info.param.format); });

}  // namespace
}  // namespace corepool
