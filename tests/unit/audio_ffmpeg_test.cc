// Tests of decoding through FFmpeg (AudioStream over audio/audio_decoder.h):
// one clip, synthesized here and written by this file's own WAV writer, is
// made into each container and codec by the ffmpeg command-line tool and
// decoded back; the result is compared with the clip's own samples (exact for
// PCM and FLAC; signal-to-error ratio and length within one codec frame for
// the lossy codecs). Then damage: a cut MP4, a video-only file, bytes flipped
// in the middle of an MP3 and an Ogg (that stretch is lost, not the file, and
// the audio after it keeps its time); a chosen audio stream; a half-hour file
// in bounded memory. Skipped, with the reason, without the ffmpeg tool
// (scripts/install-deps.sh installs it). The fixture owns a temp dir.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

extern "C" {
#include <libavformat/avformat.h>
}

#include "audio/audio_source.h"
#include "audio/audio_stream.h"
#include "audio/event_json.h"
#include "tests/support/sanitized.h"
#include "tests/support/scratch_dir_test.h"
#include "tests/support/proc_status.h"
#include "tools/audio_synth.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int kRate = 16000;
constexpr double kPi = 3.14159265358979323846;

bool have_ffmpeg() { return std::system("ffmpeg -version > /dev/null 2>&1") == 0; }

// Runs `ffmpeg <args>` quietly; true on success.
bool ffmpeg(const std::string& args) {
  return std::system(("ffmpeg -nostdin -hide_banner -loglevel error -y " + args).c_str()) == 0;
}

// A sweep from 300 to 1500 Hz over a 220 Hz tone, with a slow tremolo: every
// lag and every dropped stretch changes the waveform.
std::vector<float> clip(double seconds) {
  std::vector<float> x(size_t(seconds * kRate));
  for (size_t i = 0; i < x.size(); ++i) {
    const double t = double(i) / kRate;
    const double sweep = 300 * t + 1200 * t * t / (2 * seconds);  // phase of the sweep, cycles
    const double level = 0.6 + 0.3 * std::sin(2 * kPi * 0.7 * t);
    x[i] = float(level * (0.5 * std::sin(2 * kPi * sweep) + 0.25 * std::sin(2 * kPi * 220 * t)));
  }
  return x;
}

// 16-bit mono PCM WAV, written by hand: the reference owes nothing to FFmpeg.
// Returns the samples as the file holds them.
std::vector<float> write_wav(const std::string& path, const std::vector<float>& x) {
  auto le = [](std::ofstream& o, uint32_t v, int bytes) {
    for (int b = 0; b < bytes; ++b) o.put(char((v >> (8 * b)) & 0xFF));
  };
  const uint32_t data = uint32_t(x.size() * 2);
  std::ofstream o(path, std::ios::binary);
  o.write("RIFF", 4), le(o, 36 + data, 4), o.write("WAVEfmt ", 8), le(o, 16, 4);
  le(o, 1, 2), le(o, 1, 2), le(o, kRate, 4), le(o, kRate * 2, 4), le(o, 2, 2), le(o, 16, 2);
  o.write("data", 4), le(o, data, 4);
  std::vector<float> held(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const auto s = int16_t(std::lround(std::max(-1.0f, std::min(1.0f, x[i])) * 32767.0f));
    le(o, uint16_t(s), 2);
    held[i] = float(s) / 32768.0f;
  }
  return held;
}

std::vector<float> decode(const std::string& path, int audio_stream = 0) {
  AudioStream stream(path, kRate, 32768, audio_stream);
  std::vector<float> out;
  while (stream.read(out)) {
  }
  return out;
}

// Signal-to-error ratio of `got` against `want` over their common length, dB.
double snr_db(const std::vector<float>& want, const std::vector<float>& got, size_t from = 0) {
  double signal = 0, error = 0;
  for (size_t i = from; i < std::min(want.size(), got.size()); ++i) {
    signal += double(want[i]) * want[i];
    error += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
  }
  return 10 * std::log10(signal / std::max(error, 1e-20));
}

std::string slurp(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void spill(const std::string& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

class AudioFfmpegTest : public corepool::testing::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    if (!have_ffmpeg()) GTEST_SKIP() << "the ffmpeg command-line tool is not installed (make deps)";
  }

  // The clip as a WAV (the reference) and its samples.
  std::vector<float> reference(double seconds, const std::string& name = "ref.wav") {
    return write_wav(path(name), clip(seconds));
  }

  // The AudioError message of decoding `file`, or "" if it decoded.
  static std::string error_of(const std::string& file, AudioErrorKind* kind = nullptr) {
    try {
      decode(file);
    } catch (const AudioError& e) {
      if (kind) *kind = e.kind();
      return e.what();
    }
    return "";
  }
};

struct CodecCase {
  const char* name;     // test name, and the file's extension after the first '_'
  const char* file;     // output file name
  const char* options;  // ffmpeg options between the inputs and the output
  bool with_video;      // a test picture as a second input
  int frame;            // the codec's frame at 16 kHz: the length tolerance (0 for exact)
  double min_snr_db;    // measured 26-38 dB for the lossy ones (Debian 12, FFmpeg 5.1)
};

class AudioFfmpegCodecTest : public AudioFfmpegTest, public ::testing::WithParamInterface<CodecCase> {};

TEST_P(AudioFfmpegCodecTest, DecodesToTheClipWithinTheCodecsError) {
  const CodecCase& c = GetParam();
  const std::vector<float> want = reference(3.0);
  const std::string video = c.with_video ? "-f lavfi -i testsrc=duration=3:size=64x48:rate=10 " : "";
  ASSERT_TRUE(ffmpeg("-i " + path("ref.wav") + " " + video + c.options + " " + path(c.file)));

  const std::vector<float> got = decode(path(c.file));
  EXPECT_LE(std::abs(double(got.size()) - double(want.size())), double(c.frame))
      << got.size() << " samples decoded, " << want.size() << " in the clip";
  if (c.frame == 0) {
    ASSERT_EQ(got, want);
    return;
  }
  const double snr = snr_db(want, got);
  EXPECT_GE(snr, c.min_snr_db) << "signal-to-error ratio";
  // An offset of a few samples would cost most of that ratio: the lags line up.
  const std::vector<float> late(got.begin() + std::min<size_t>(got.size(), 8), got.end());
  EXPECT_LT(snr_db(want, late), snr) << "one lag is better than none";
}

INSTANTIATE_TEST_SUITE_P(
    AudioFfmpeg, AudioFfmpegCodecTest,
    ::testing::Values(CodecCase{"Wav", "c.wav", "-c:a pcm_s16le", false, 0, 0},
                      CodecCase{"Flac", "c.flac", "-c:a flac", false, 0, 0},
                      CodecCase{"Mp3", "c.mp3", "-c:a libmp3lame -b:a 64k", false, 576, 20},
                      CodecCase{"Opus", "c.opus", "-c:a libopus -b:a 48k", false, 320, 20},
                      CodecCase{"Vorbis", "c.ogg", "-c:a libvorbis", false, 1024, 20},
                      CodecCase{"AacM4a", "c.m4a", "-c:a aac -b:a 64k", false, 1024, 20},
                      CodecCase{"Mp4WithVideo", "c.mp4", "-map 1:v -map 0:a -c:v mpeg4 -c:a aac -b:a 64k", true,
                                1024, 20},
                      CodecCase{"MkvWithVideo", "c.mkv", "-map 1:v -map 0:a -c:v mpeg4 -c:a libopus", true, 320,
                                20}),
    [](const auto& info) { return std::string(info.param.name); });

// serve's request bodies: the same bytes from memory give the same samples.
TEST_F(AudioFfmpegTest, M4aFromMemoryGivesTheSameSamplesAsFromDisk) {
  reference(2.0);
  ASSERT_TRUE(ffmpeg("-i " + path("ref.wav") + " -c:a aac " + path("a.m4a")));
  AudioStream stream("request body", std::make_shared<const std::string>(slurp(path("a.m4a"))), kRate);
  std::vector<float> from_memory;
  while (stream.read(from_memory)) {
  }
  EXPECT_THAT(stream.info().format, HasSubstr("AAC"));
  EXPECT_EQ(from_memory, decode(path("a.m4a")));
}

// A WAV header that says 16-bit PCM over MP3 frames (as some converters write
// them): FFmpeg probes the data behind the PCM tag and decodes MP3. A WAV's
// data is probed on its first packet only (audio_source.cc); that finds it.
TEST_F(AudioFfmpegTest, Mp3BehindAPcmWavHeaderIsDecodedAsMp3) {
  reference(3.0);
  ASSERT_TRUE(ffmpeg("-i " + path("ref.wav") + " -c:a libmp3lame -b:a 64k -id3v2_version 0 -write_xing 0 " +
                     path("a.mp3")));
  const std::string mp3 = slurp(path("a.mp3"));
  std::string header = "RIFF....WAVEfmt ";
  auto le = [&](uint32_t v, int bytes) {
    for (int b = 0; b < bytes; ++b) header.push_back(char((v >> (8 * b)) & 0xFF));
  };
  le(16, 4), le(1, 2), le(1, 2), le(kRate, 4), le(kRate * 2, 4), le(2, 2), le(16, 2);  // PCM, 16-bit mono
  header += "data", le(uint32_t(mp3.size()), 4);
  const uint32_t riff = uint32_t(header.size() - 8 + mp3.size());
  for (int b = 0; b < 4; ++b) header[size_t(4 + b)] = char((riff >> (8 * b)) & 0xFF);
  spill(path("mp3.wav"), header + mp3);

  AudioStream stream(path("mp3.wav"), kRate);
  std::vector<float> got;
  while (stream.read(got)) {
  }
  EXPECT_THAT(stream.info().format, HasSubstr("MP3"));
  const std::vector<float> want = decode(path("a.mp3"));
  EXPECT_LE(std::abs(double(got.size()) - double(want.size())), 1152.0);
  EXPECT_GE(snr_db(want, got), 60) << "the same frames, decoded the same";
}

// What makes opening many short WAVs cheap: their PCM data is probed on one
// packet, not FFmpeg's 32 (each probe runs every demuxer's); any other
// container keeps FFmpeg's own limit.
TEST_F(AudioFfmpegTest, AWavIsProbedOnOnePacketAndOtherContainersAsFfmpegProbesThem) {
  reference(1.0);
  ASSERT_TRUE(ffmpeg("-i " + path("ref.wav") + " -c:a flac " + path("a.flac")));
  const MediaInput wav(AudioSource::file(path("ref.wav")));
  const MediaInput flac(AudioSource::file(path("a.flac")));
  ASSERT_NE(wav.get(), nullptr) << wav.error_text();
  ASSERT_NE(flac.get(), nullptr) << flac.error_text();
  AVFormatContext* defaults = avformat_alloc_context();
  ASSERT_NE(defaults, nullptr);
  const int ffmpeg_default = defaults->max_probe_packets;
  avformat_free_context(defaults);
  EXPECT_EQ(wav.get()->max_probe_packets, 1);
  EXPECT_GT(ffmpeg_default, 1);
  EXPECT_EQ(flac.get()->max_probe_packets, ffmpeg_default);
}

TEST_F(AudioFfmpegTest, VideoWithoutAudioIsNotAudioAndSaysSo) {
  ASSERT_TRUE(ffmpeg("-f lavfi -i testsrc=duration=1:size=64x48:rate=10 -c:v mpeg4 " + path("v.mp4")));
  AudioErrorKind kind = AudioErrorKind::kInvalid;
  const std::string message = error_of(path("v.mp4"), &kind);
  EXPECT_THAT(message, StartsWith(path("v.mp4") + ": not an audio file (no audio stream; "));
  EXPECT_THAT(message, HasSubstr("1 video stream"));
  EXPECT_EQ(int(kind), int(AudioErrorKind::kNotAudio));
}

// FFmpeg writes an MP4's index (moov) last: cut, the file has none.
TEST_F(AudioFfmpegTest, Mp4CutBeforeItsIndexIsNamedAsTruncated) {
  reference(3.0);
  ASSERT_TRUE(ffmpeg("-i " + path("ref.wav") + " -c:a aac " + path("a.m4a")));
  std::string bytes = slurp(path("a.m4a"));
  spill(path("cut.m4a"), bytes.substr(0, bytes.size() / 2));
  AudioErrorKind kind = AudioErrorKind::kNotAudio;
  EXPECT_EQ(error_of(path("cut.m4a"), &kind),
            path("cut.m4a") + ": damaged or truncated QuickTime / MOV (moov atom not found)");
  EXPECT_EQ(int(kind), int(AudioErrorKind::kInvalid));
}

// With the index first (faststart) the cut shows as missing frames.
TEST_F(AudioFfmpegTest, FaststartM4aCutInHalfIsTruncatedAfterItsDecodableHalf) {
  reference(6.0);
  ASSERT_TRUE(ffmpeg("-i " + path("ref.wav") + " -c:a aac -movflags +faststart " + path("a.m4a")));
  std::string bytes = slurp(path("a.m4a"));
  spill(path("cut.m4a"), bytes.substr(0, bytes.size() / 2));
  AudioStream stream(path("cut.m4a"), kRate);
  std::vector<float> out;
  try {
    while (stream.read(out)) {
    }
    ADD_FAILURE() << "no error";
  } catch (const AudioError& e) {
    EXPECT_THAT(e.what(), StartsWith(path("cut.m4a") + ": truncated: header says 96000 frames, read "));
  }
  EXPECT_GT(out.size(), size_t(2 * kRate)) << "the first half was decoded";
}

// `bytes` with `n` bytes in the middle inverted.
std::string damage_middle(const std::string& bytes, size_t n) {
  std::string d = bytes;
  for (size_t i = d.size() / 2; i < d.size() / 2 + n; ++i) d[i] = char(d[i] ^ 0x5A);
  return d;
}

// A clean Ogg Vorbis file as libsndfile writes it: its frame timestamps
// inside a page are off by up to a quarter block (FFmpeg's estimates; +128
// samples, then -128, at 16 kHz), which is not lost audio. Nothing may be
// listed as skipped, at any rate.
TEST_F(AudioFfmpegTest, ACleanOggListsNothingAsSkippedThoughItsTimestampsJitter) {
  for (int rate : {8000, 16000, 44100}) {
    synth::FileSpec spec;
    spec.sample_rate = rate;
    spec.format = "ogg";
    spec.sections = {{synth::Kind::kTone, 3.0}, {synth::Kind::kNoise, 2.0}, {synth::Kind::kChord, 3.0},
                     {synth::Kind::kClicks, 1.0}};
    const std::string file = path("clean-" + std::to_string(rate) + ".ogg");
    synth::write_audio(file, spec);
    AudioStream stream(file, kRate);
    std::vector<float> got;
    while (stream.read(got)) {
    }
    EXPECT_TRUE(stream.skipped().empty()) << rate << " Hz: " << skipped_text(stream.skipped());
    EXPECT_NEAR(double(got.size()) / kRate, 9.0, 0.05) << rate << " Hz";
  }
}

// A chained Ogg whose second link has more channels than its first (as
// klettres-data's Czech syllables do): both links decode, in order, the
// stereo one mixed down like any stereo file. `cat` of two Ogg files is a
// valid chained Ogg. Before the fold it was refused: "channels change from 1 to 2".
TEST_F(AudioFfmpegTest, AChainedOggThatTurnsStereoDecodesBothLinks) {
  const std::vector<float> want = reference(4.0);
  ASSERT_TRUE(ffmpeg("-i " + path("ref.wav") + " -t 2 -c:a libvorbis " + path("mono.ogg")));
  // The second link: the clip's last 2 s on the left, silence on the right,
  // so its mono is half the clip (a fold that dropped channels would differ).
  ASSERT_TRUE(ffmpeg("-i " + path("ref.wav") + " -ss 2 -af pan='stereo|c0=c0|c1=0*c0' -c:a libvorbis " +
                     path("stereo.ogg")));
  spill(path("chained.ogg"), slurp(path("mono.ogg")) + slurp(path("stereo.ogg")));

  std::vector<float> got;
  ASSERT_NO_THROW(got = decode(path("chained.ogg")));
  ASSERT_NEAR(double(got.size()) / kRate, 4.0, 0.05);
  const std::vector<float> first(want.begin(), want.begin() + 2 * kRate);
  std::vector<float> second_half(want.begin() + 2 * kRate, want.end());
  for (float& v : second_half) v *= 0.5f;
  EXPECT_GT(snr_db(first, got), 15.0) << "the mono link";
  // Where the first link ends is only as exact as its last granule position:
  // the second link is looked for within 20 ms of 2 s.
  double best = -100;
  int best_lag = 0;
  for (int lag = -kRate / 50; lag <= kRate / 50; ++lag) {
    const std::vector<float> got_second(got.begin() + 2 * kRate + lag, got.end());
    const double snr = snr_db(second_half, got_second, kRate / 10);  // past Vorbis's priming
    if (snr > best) best = snr, best_lag = lag;
  }
  EXPECT_GT(best, 15.0) << "the stereo link, mixed down (best at a lag of " << best_lag << " samples)";
}

struct DamageCase {
  const char* name;
  const char* file;
  const char* options;
};

class AudioFfmpegDamageTest : public AudioFfmpegTest, public ::testing::WithParamInterface<DamageCase> {};

// 20 s, 2 kB destroyed at the middle: decoding goes on, the lost stretch is
// listed near 10 s and comes out as silence, so the last 8 s keep their time.
TEST_P(AudioFfmpegDamageTest, DamagedMiddleCostsThatStretchNotTheFile) {
  const std::vector<float> want = reference(20.0);
  const std::string whole = path(std::string("whole.") + GetParam().file);
  const std::string damaged = path(std::string("damaged.") + GetParam().file);
  ASSERT_TRUE(ffmpeg("-i " + path("ref.wav") + " " + GetParam().options + " " + whole));
  spill(damaged, damage_middle(slurp(whole), 2000));

  AudioStream stream(damaged, kRate);
  std::vector<float> got;
  while (stream.read(got)) {
  }
  ASSERT_FALSE(stream.skipped().empty()) << "nothing listed as skipped";
  const SkippedStretch& s = stream.skipped().front();
  EXPECT_GT(s.at_seconds, 7.0);
  EXPECT_LT(s.at_seconds, 11.0);
  EXPECT_GT(s.seconds, 0.0);
  EXPECT_LT(s.seconds, 4.0);
  EXPECT_NEAR(double(got.size()) / kRate, 20.0, 0.1);
  const size_t tail = size_t(12 * kRate);
  // Measured 26 dB (MP3 and Vorbis); -3 dB with the stretch dropped instead of filled.
  EXPECT_GT(snr_db(want, got, tail), 15.0) << "the audio after the damage moved in time";
}

INSTANTIATE_TEST_SUITE_P(AudioFfmpeg, AudioFfmpegDamageTest,
                         ::testing::Values(DamageCase{"Mp3", "mp3", "-c:a libmp3lame -b:a 64k"},
                                           DamageCase{"Vorbis", "ogg", "-c:a libvorbis"}),
                         [](const auto& info) { return std::string(info.param.name); });

// `wav` with its data chunk cut to `keep` bytes and the RIFF and data sizes
// rewritten to match: a whole file whose last block is short. IMA ADPCM
// decodes in blocks of block_align bytes; FFmpeg's decoder refuses a short one
// ("invalid number of samples in packet"), as in ksirk's roll.wav (data
// 27,897 bytes in 512-byte blocks). Returns "" if the layout is not the
// expected one (fmt, then fact or data).
std::string cut_wav_data(const std::string& wav, size_t keep) {
  auto u32 = [&](size_t at) {
    return uint32_t(uint8_t(wav[at])) | uint32_t(uint8_t(wav[at + 1])) << 8 |
           uint32_t(uint8_t(wav[at + 2])) << 16 | uint32_t(uint8_t(wav[at + 3])) << 24;
  };
  auto put = [](std::string& s, size_t at, uint32_t v) {
    for (int b = 0; b < 4; ++b) s[at + size_t(b)] = char((v >> (8 * b)) & 0xFF);
  };
  size_t at = 12;
  while (at + 8 <= wav.size() && wav.compare(at, 4, "data") != 0) at += 8 + u32(at + 4);
  if (at + 8 > wav.size() || keep > u32(at + 4)) return "";
  std::string out = wav.substr(0, at + 8 + keep);
  put(out, at + 4, uint32_t(keep));
  put(out, 4, uint32_t(out.size() - 8));
  return out;
}

// A whole file whose last packet the codec refuses is read to there and
// tagged; the refused packet is listed as a skipped stretch at the end rather
// than costing the whole file (it was "truncated: the data ends in a damaged
// packet", and four real recordings in Debian's game packages were refused so).
TEST_F(AudioFfmpegTest, ARefusedLastPacketCostsItsStretchNotTheFile) {
  const std::vector<float> want = reference(3.0);
  ASSERT_TRUE(ffmpeg("-i " + path("ref.wav") + " -ar 8000 -ac 2 -c:a adpcm_ima_wav " + path("adpcm.wav")));
  const std::string whole = slurp(path("adpcm.wav"));
  // 8 kHz stereo IMA ADPCM: FFmpeg writes 1,024-byte blocks of 1,017 frames
  // each; 23 whole blocks (2.92 s) and 249 bytes of the next, roll.wav's
  // remainder (half a block still decodes).
  const std::string cut = cut_wav_data(whole, 23 * 1024 + 249);
  ASSERT_FALSE(cut.empty()) << "adpcm.wav: no data chunk where expected";
  spill(path("short-block.wav"), cut);

  AudioStream stream(path("short-block.wav"), kRate);
  std::vector<float> got;
  ASSERT_NO_THROW({
    while (stream.read(got)) {
    }
  });
  const double seconds = double(got.size()) / kRate;
  EXPECT_NEAR(seconds, 23 * 1017 / 8000.0, 0.05) << "every whole block, and no silence after them";
  ASSERT_EQ(stream.skipped().size(), 1u) << skipped_text(stream.skipped());
  EXPECT_TRUE(stream.skipped()[0].at_end);
  EXPECT_NEAR(stream.skipped()[0].at_seconds, 23 * 1017 / 8000.0, 0.05);
  EXPECT_LT(stream.skipped()[0].seconds, 0.2);
  EXPECT_GT(snr_db(want, got, kRate / 10), 10.0) << "the decodable part is the clip";
}

// Zero crossings per second of a pure tone: twice its frequency.
double crossings_per_second(const std::vector<float>& x) {
  int n = 0;
  for (size_t i = 1; i < x.size(); ++i) n += (x[i - 1] < 0) != (x[i] < 0);
  return double(n) * kRate / double(x.size());
}

TEST_F(AudioFfmpegTest, AudioStreamPicksTheNthAudioStreamAndNamesTheCountWhenItIsMissing) {
  ASSERT_TRUE(ffmpeg("-f lavfi -i sine=frequency=300:duration=2 -f lavfi -i sine=frequency=1000:duration=2 "
                     "-map 0 -map 1 -c:a flac " + path("two.mka")));
  EXPECT_NEAR(crossings_per_second(decode(path("two.mka"))), 600, 10);
  EXPECT_NEAR(crossings_per_second(decode(path("two.mka"), 1)), 2000, 10);
  try {
    decode(path("two.mka"), 2);
    ADD_FAILURE() << "no error";
  } catch (const AudioError& e) {
    EXPECT_EQ(std::string(e.what()),
              path("two.mka") + ": no audio stream 2: the file has 2 audio streams (--audio-stream 0..1)");
  }
}

using testing::reset_peak;
using testing::status_kb;

// 30 min at 16 kHz: 115 MB of floats if it were decoded whole.
TEST_F(AudioFfmpegTest, HalfHourFlacStreamsInBoundedMemory) {
  ASSERT_TRUE(ffmpeg("-f lavfi -i anullsrc=r=16000:cl=mono -t 1800 -c:a flac " + path("long.flac")));
  reset_peak();
  const long rss_before = status_kb("VmRSS");
  AudioStream stream(path("long.flac"), kRate);
  std::vector<float> block;
  int64_t samples = 0;
  while (stream.read(block)) {
    samples += int64_t(block.size());
    block.clear();
  }
  const long growth_kb = status_kb("VmHWM") - rss_before;
  EXPECT_EQ(samples, int64_t(1800) * kRate);
  // ASan keeps freed blocks in quarantine (up to 256 MB) and FFmpeg allocates
  // a packet at a time, so under ASan RSS measures the sanitizer: the plain
  // build checks the bound (all pass under ASan with quarantine_size_mb=0).
  if (!corepool::testing::kSanitized) {
    EXPECT_LT(growth_kb, 20 * 1024) << "decoding grew memory by " << growth_kb << " kB";
  }
}

// What batch puts in a file's summary and prints, for the stretches above.
TEST(SkippedReportTest, SummaryGivesTheTotalAndEachStartAndTheLineGivesEachStretch) {
  const std::vector<SkippedStretch> skipped = {{29.9904, 0.2874, false}, {41.2, 2.043, false}};
  EXPECT_EQ(skipped_json(skipped), nlohmann::json::parse(R"({"seconds": 2.33, "at": [29.99, 41.2]})"));
  EXPECT_EQ(skipped_text(skipped), "undecodable, read as silence: 0.29 s at t = 29.99 s, 2.04 s at t = 41.20 s");
  const std::vector<SkippedStretch> with_end = {{29.9904, 0.2874, false}, {59.417, 0.0, true}};
  EXPECT_EQ(skipped_text(with_end),
            "undecodable, read as silence: 0.29 s at t = 29.99 s; undecodable last packet at t = 59.42 s, dropped");
  EXPECT_EQ(skipped_text({{3.439, 0.0, true}}), "undecodable last packet at t = 3.44 s, dropped");
}

}  // namespace
}  // namespace corepool
