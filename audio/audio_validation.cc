// open_validated(): the checks of stage 1, for a path or a buffer alike. For a
// path it asks the OS first (missing, permissions, directory) so those reasons
// are exact, then FFmpeg for the format (MediaInput), the audio stream and the
// codec (AudioDecoder). Only the returned decoder outlives the call.
#include "audio/audio_validation.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

namespace corepool {
namespace {

constexpr AudioErrorKind kNotAudio = AudioErrorKind::kNotAudio;
constexpr AudioErrorKind kInvalid = AudioErrorKind::kInvalid;
constexpr AudioErrorKind kIo = AudioErrorKind::kIo;

// What a RIFF/WAVE header claims, read by us: FFmpeg refuses a 0 Hz WAV with a
// generic message and clamps a truncated one's data size to what is there.
struct RiffHeader {
  bool has_fmt = false;
  uint16_t format_tag = 0;
  uint16_t channels = 0;
  uint32_t sample_rate = 0;
  uint16_t block_align = 0;
  bool has_data = false;
  int64_t data_offset = 0;
  uint32_t data_bytes = 0;
};

uint32_t le32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint16_t le16(const unsigned char* p) { return uint16_t(p[0] | p[1] << 8); }

// Random access to the source's raw bytes, for the header peek: the buffer, or
// the file opened afresh (the demuxer's reader has its own position).
class RawBytes {
 public:
  explicit RawBytes(const AudioSource& source) : source_(source) {
    if (!source.in_memory) file_.open(source.name, std::ios::binary);
  }

  // All `n` bytes at `offset`, or false.
  bool read(int64_t offset, void* out, size_t n) {
    if (source_.in_memory) {
      const std::string_view b = source_.bytes;
      if (offset < 0 || uint64_t(offset) > b.size() || n > b.size() - size_t(offset)) return false;
      std::memcpy(out, b.data() + offset, n);
      return true;
    }
    file_.clear();
    return file_.seekg(std::streamoff(offset)) &&
           file_.read(static_cast<char*>(out), std::streamsize(n));
  }

 private:
  const AudioSource& source_;
  std::ifstream file_;
};

// Walks the chunks up to "data". Returns false for anything that is not a
// little-endian RIFF/WAVE file; a damaged walk just leaves fields unset.
bool peek_riff(const AudioSource& source, RiffHeader& h) {
  RawBytes raw(source);
  unsigned char buf[16];
  if (!raw.read(0, buf, 12) || std::memcmp(buf, "RIFF", 4) != 0 ||
      std::memcmp(buf + 8, "WAVE", 4) != 0) {
    return false;
  }
  int64_t pos = 12;
  for (int chunk = 0; chunk < 64 && raw.read(pos, buf, 8); ++chunk) {
    const uint32_t size = le32(buf + 4);
    pos += 8;
    if (std::memcmp(buf, "data", 4) == 0) {
      h.has_data = true;
      h.data_offset = pos;
      h.data_bytes = size;
      return true;
    }
    if (std::memcmp(buf, "fmt ", 4) == 0 && size >= 16) {
      if (!raw.read(pos, buf, 16)) return true;
      h.has_fmt = true;
      h.format_tag = le16(buf);
      h.channels = le16(buf + 2);
      h.sample_rate = le32(buf + 4);
      h.block_align = le16(buf + 12);
    }
    pos += int64_t(size) + (size & 1);  // chunks are padded to even
  }
  return true;
}

// Missing, unreadable, directory, special or 0-byte file. O_NONBLOCK so that a
// FIFO is rejected instead of blocking the caller until someone writes to it.
void check_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) throw AudioError(path, "no such file", kIo);
    if (err == EACCES || err == EPERM) throw AudioError(path, "permission denied", kIo);
    throw AudioError(path, std::string("cannot open (") + std::strerror(err) + ")", kIo);
  }
  struct stat st {};
  const int rc = ::fstat(fd, &st);
  ::close(fd);
  if (rc != 0) {
    throw AudioError(path, std::string("cannot stat (") + std::strerror(errno) + ")", kIo);
  }
  if (S_ISDIR(st.st_mode)) throw AudioError(path, "is a directory, not an audio file", kIo);
  if (!S_ISREG(st.st_mode)) throw AudioError(path, "not a regular file", kIo);
  if (st.st_size == 0) throw AudioError(path, "empty file (0 bytes)", kInvalid);
}

// A path is checked with the OS; a buffer only needs something in it.
// A pipe is only known to be empty once read (explain_open_failure).
void check_source(const AudioSource& source) {
  if (source.pipe) return;
  if (!source.in_memory) return check_file(source.name);
  if (source.bytes.empty()) throw AudioError(source.name, "empty (0 bytes)", kInvalid);
}

// The last `n` bytes of the source (fewer if it is shorter).
std::string tail_bytes(const AudioSource& source, size_t n) {
  if (source.in_memory) {
    const std::string_view b = source.bytes;
    return std::string(b.substr(b.size() > n ? b.size() - n : 0));
  }
  std::ifstream in(source.name, std::ios::binary | std::ios::ate);
  const std::streamoff size = in ? std::streamoff(in.tellg()) : 0;
  const std::streamoff from = size > std::streamoff(n) ? size - std::streamoff(n) : 0;
  std::string bytes(size_t(size - from), '\0');
  if (!in.seekg(from) || !in.read(bytes.data(), std::streamsize(bytes.size()))) return {};
  return bytes;
}

// A cut Ogg stream ends in a partial page. FFmpeg reads it to its last whole
// page and takes that as the length, so a cut is invisible to it; the last
// page's own length says it. The end-of-stream flag is not asked for: encoders
// in the wild leave it out of whole files (548 of klettres-data's spoken
// syllables), which FFmpeg decodes to the end. 64 kB holds the longest page (65307).
bool ogg_end_missing(const AudioSource& source) {
  const std::string tail = tail_bytes(source, 65536 + 27);
  const size_t at = tail.rfind("OggS");
  if (at == std::string::npos || tail.size() - at < 27) return true;
  const auto* page = reinterpret_cast<const unsigned char*>(tail.data() + at);
  const size_t segments = page[26];
  if (tail.size() - at < 27 + segments) return true;
  size_t length = 27 + segments;
  for (size_t i = 0; i < segments; ++i) length += page[27 + i];
  return tail.size() - at < length;
}

constexpr const char* kMp4OnPipe =
    "an MP4/MOV with its index (moov) at the end cannot be read from a pipe: remux it with "
    "ffmpeg -movflags +faststart, or give the file instead of stdin";

// FFmpeg refused the file: not audio at all, or a damaged header of a format
// it did recognise (an MP4 cut before its index: "moov atom not found").
[[noreturn]] void explain_open_failure(const AudioSource& source, const MediaInput& input) {
  const std::string& name = source.name;
  if (source.pipe && input.pipe_bytes() == 0 && input.failure() != OpenFailure::kIo) {
    throw AudioError(name, "empty (no data on standard input)", kInvalid);
  }
  if (source.pipe && input.container().find("QuickTime") != std::string::npos) {
    throw AudioError(name, kMp4OnPipe, kInvalid);
  }
  switch (input.failure()) {
    case OpenFailure::kIo: throw AudioError(name, "cannot read (" + input.error_text() + ")", kIo);
    case OpenFailure::kDamaged: {
      RiffHeader h;
      if (peek_riff(source, h) && h.has_fmt) {
        if (h.sample_rate == 0) throw AudioError(name, "sample rate is 0 Hz", kInvalid);
        if (h.channels == 0) throw AudioError(name, "header says 0 channels", kInvalid);
      }
      throw AudioError(name, "damaged or truncated " + input.container() + " (" + input.error_text() + ")",
                       kInvalid);
    }
    default: throw AudioError(name, "not an audio file (" + input.error_text() + ")", kNotAudio);
  }
}

void check_header(const std::string& name, const AVCodecParameters& par) {
  const int rate = par.sample_rate;
  if (rate == 0) throw AudioError(name, "sample rate is 0 Hz", kInvalid);
  if (rate < kMinSampleRate || rate > kMaxSampleRate) {
    throw AudioError(name, "sample rate " + std::to_string(rate) + " Hz is outside " +
                               std::to_string(kMinSampleRate) + ".." +
                               std::to_string(kMaxSampleRate) + " Hz",
                     kInvalid);
  }
  const int channels = par.ch_layout.nb_channels;
  if (channels <= 0) throw AudioError(name, "header says 0 channels", kInvalid);
  if (channels > kMaxChannels) {
    throw AudioError(name, std::to_string(channels) + " channels (at most " +
                               std::to_string(kMaxChannels) + " supported)",
                     kInvalid);
  }
}

// The length the container states. Exact only where it is written in a header
// (WAV's data size, FLAC's STREAMINFO, MP4's index, an MP3's Xing frame count);
// a length guessed from the bitrate, or read off the last page, is no basis
// for calling a file truncated.
void fill_length(const AVFormatContext& format, const AVStream& st, AudioInfo& info) {
  const int rate = info.sample_rate;
  if (st.duration != AV_NOPTS_VALUE && st.duration >= 0) {
    info.frames = av_rescale_q(st.duration, st.time_base, {1, rate});
  } else if (format.duration != AV_NOPTS_VALUE && format.duration >= 0) {
    info.frames = av_rescale(format.duration, rate, AV_TIME_BASE);
  }
  info.frames_exact = format.duration_estimation_method == AVFMT_DURATION_FROM_STREAM &&
                      st.duration != AV_NOPTS_VALUE;
  const AVCodecDescriptor* codec = avcodec_descriptor_get(st.codecpar->codec_id);
  const bool lossless = codec && (codec->props & AV_CODEC_PROP_LOSSLESS);
  // A lossy codec's stated length may count its encoder delay and padding
  // (an MP3's Xing count: about two frames more than it decodes to).
  const int64_t frame = std::max(st.codecpar->frame_size, 1152);
  info.frames_slack = lossless ? 0 : 4 * frame + std::max(st.codecpar->initial_padding, 0);
}

// The frames a WAV's data chunk claims (FFmpeg clamps them to what the file
// holds, so a truncated WAV would look whole). Only for PCM/float, where
// block_align is one frame, and not for the 0xFFFFFFFF size streaming writers
// leave behind; -1 when that does not apply.
int64_t riff_claimed_frames(const AudioSource& source) {
  RiffHeader h;
  if (!peek_riff(source, h) || !h.has_fmt || !h.has_data || h.block_align == 0) return -1;
  const bool frame_aligned = h.format_tag == 1 || h.format_tag == 3 || h.format_tag == 0xFFFE;
  if (!frame_aligned || h.data_bytes == 0xFFFFFFFFu) return -1;
  return int64_t(h.data_bytes / h.block_align);
}

std::string describe_format(const MediaInput& input, const AVCodecParameters& par) {
  const AVCodecDescriptor* codec = avcodec_descriptor_get(par.codec_id);
  std::string text = input.container();
  text += " / ";
  text += codec && codec->long_name ? codec->long_name : avcodec_get_name(par.codec_id);
  return text;
}

// Where a container states its length better than FFmpeg reports it: a WAV's
// data chunk (FFmpeg clamps it to the bytes present) and an Ogg's last page
// (FFmpeg takes the last whole page as the end).
void check_length(const AudioSource& source, const std::string& container, AudioInfo& info) {
  if (container == "wav") {
    const int64_t claimed = riff_claimed_frames(source);
    if (claimed >= 0 && (claimed > info.frames || claimed == 0)) {
      info.frames = claimed;
      info.frames_exact = true;
    }
  }
  if (info.frames_exact && info.frames == 0) throw AudioError(source.name, "no audio frames (empty)", kInvalid);
  if (container == "ogg" && ogg_end_missing(source)) {
    throw AudioError(source.name, "truncated (the last Ogg page is cut short)", kInvalid);
  }
}

// An MP4 written without +faststart has its index (moov) after the samples: a
// pipe reads through them to find it, and the demuxer would then have to seek
// back to the first sample, past what the I/O buffer still holds. Said now,
// rather than as "no audio frames" after reading the whole stream.
void check_pipe_reachable(const AudioSource& source, const AVFormatContext& format, const AVStream& st) {
  if (!source.pipe || std::string_view(format.iformat->name).find("mp4") == std::string_view::npos) return;
  const AVIndexEntry* first = avformat_index_get_entry(const_cast<AVStream*>(&st), 0);
  const AVIOContext* io = format.pb;
  const int64_t buffered_from = io->pos - (io->buf_end - io->buffer);  // the oldest byte still in the buffer
  if (first && first->pos < buffered_from) throw AudioError(source.name, kMp4OnPipe, kInvalid);
}

}  // namespace

ValidatedAudio open_validated(const AudioSource& source, int audio_stream) {
  check_source(source);
  auto input = std::make_unique<MediaInput>(source);
  if (!input->get()) explain_open_failure(source, *input);
  const MediaInput& in = *input;
  ValidatedAudio validated;
  validated.decoder = std::make_unique<AudioDecoder>(std::move(input), source.name, audio_stream, source.in_memory);
  const AVStream& st = validated.decoder->stream();
  check_header(source.name, *st.codecpar);
  AudioInfo& info = validated.info;
  info.sample_rate = st.codecpar->sample_rate;
  info.channels = st.codecpar->ch_layout.nb_channels;
  fill_length(*in.get(), st, info);
  // The header peeks below reopen or seek the source: a pipe has neither, and
  // a stream has no length to fall short of.
  if (source.pipe) info.frames_exact = false;
  else check_length(source, in.get()->iformat->name, info);
  check_pipe_reachable(source, *in.get(), st);
  info.format = describe_format(in, *st.codecpar);
  return validated;
}

AudioInfo validate_audio(const std::string& path, int audio_stream) {
  return open_validated(AudioSource::file(path), audio_stream).info;
}

AudioInfo validate_audio_bytes(const std::string& name, std::string_view bytes, int audio_stream) {
  return open_validated(AudioSource::memory(name, bytes), audio_stream).info;
}

}  // namespace corepool
