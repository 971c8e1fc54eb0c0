// open_validated(): the header checks of stage 1, for a path or a buffer alike.
// For a path it asks the OS first (missing, permissions, directory) so those
// reasons are exact, then libsndfile for the format. Peeks at a WAV's RIFF header
// itself (in the file or the buffer) where libsndfile hides a problem (0 Hz
// refused with a generic message; truncated data silently "fixed"). Only the
// returned SoundFile outlives the call.
#include "audio/audio_validation.h"

#include <fcntl.h>
#include <sndfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

namespace corepool {
namespace {

constexpr AudioErrorKind kNotAudio = AudioErrorKind::kNotAudio;
constexpr AudioErrorKind kInvalid = AudioErrorKind::kInvalid;
constexpr AudioErrorKind kIo = AudioErrorKind::kIo;

// What a RIFF/WAVE header claims, read without libsndfile.
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
// the file opened afresh (libsndfile's handle has its own position).
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
void check_source(const AudioSource& source) {
  if (!source.in_memory) return check_file(source.name);
  if (source.bytes.empty()) throw AudioError(source.name, "empty (0 bytes)", kInvalid);
}

// libsndfile refused the file. It refuses a 0 Hz WAV with "SF_INFO struct
// incomplete", which would send a user looking in the wrong place. Whatever
// else it refuses is not audio to us, unless reading the file itself failed.
[[noreturn]] void explain_open_failure(const AudioSource& source, const SoundFile& file) {
  const std::string& name = source.name;
  if (!source.in_memory && file.error() == SF_ERR_SYSTEM) {
    throw AudioError(name, "cannot open (" + file.error_text() + ")", kIo);
  }
  RiffHeader h;
  if (peek_riff(source, h) && h.has_fmt) {
    if (h.sample_rate == 0) throw AudioError(name, "sample rate is 0 Hz", kInvalid);
    if (h.channels == 0) throw AudioError(name, "header says 0 channels", kInvalid);
  }
  throw AudioError(name, "not an audio file (" + file.error_text() + ")", kNotAudio);
}

void check_header(const std::string& name, const SF_INFO& sfi) {
  if (sfi.samplerate == 0) throw AudioError(name, "sample rate is 0 Hz", kInvalid);
  if (sfi.samplerate < kMinSampleRate || sfi.samplerate > kMaxSampleRate) {
    throw AudioError(name, "sample rate " + std::to_string(sfi.samplerate) + " Hz is outside " +
                               std::to_string(kMinSampleRate) + ".." +
                               std::to_string(kMaxSampleRate) + " Hz",
                     kInvalid);
  }
  if (sfi.channels <= 0) throw AudioError(name, "header says 0 channels", kInvalid);
  if (sfi.channels > kMaxChannels) {
    throw AudioError(name, std::to_string(sfi.channels) + " channels (at most " +
                               std::to_string(kMaxChannels) + " supported)",
                     kInvalid);
  }
  if (sfi.frames <= 0) throw AudioError(name, "no audio frames (empty)", kInvalid);
  // libsndfile's "length unknown". For a regular file or a buffer that means the
  // end is missing (seen with truncated Ogg): no length to check the decode against.
  if (sfi.frames == SF_COUNT_MAX) {
    throw AudioError(name, "length unknown (truncated or damaged)", kInvalid);
  }
}

// libsndfile clamps a WAV's data size to what the file holds, so a truncated
// WAV would look whole and AudioStream could never notice. Report the frames
// the header claims instead. Only for PCM/float, where block_align is one
// frame, and not for the 0 / 0xFFFFFFFF sizes streaming writers leave behind.
int64_t header_frames(const AudioSource& source, const SF_INFO& sfi) {
  if ((sfi.format & SF_FORMAT_TYPEMASK) != SF_FORMAT_WAV) return sfi.frames;
  RiffHeader h;
  if (!peek_riff(source, h) || !h.has_fmt || !h.has_data || h.block_align == 0) return sfi.frames;
  const bool frame_aligned = h.format_tag == 1 || h.format_tag == 3 || h.format_tag == 0xFFFE;
  if (!frame_aligned || h.data_bytes == 0 || h.data_bytes == 0xFFFFFFFFu) return sfi.frames;
  const int64_t claimed = int64_t(h.data_bytes / h.block_align);
  return claimed > sfi.frames ? claimed : sfi.frames;
}

// "WAV (Microsoft) / Signed 16 bit PCM", from libsndfile's own format names.
std::string describe_format(SNDFILE* file, int format) {
  SF_FORMAT_INFO major{};
  SF_FORMAT_INFO sub{};
  major.format = format & SF_FORMAT_TYPEMASK;
  sub.format = format & SF_FORMAT_SUBMASK;
  const bool has_major = sf_command(file, SFC_GET_FORMAT_INFO, &major, sizeof(major)) == 0;
  const bool has_sub = sf_command(file, SFC_GET_FORMAT_INFO, &sub, sizeof(sub)) == 0;
  std::string text = has_major && major.name ? major.name : "unknown format";
  if (has_sub && sub.name) text += std::string(" / ") + sub.name;
  return text;
}

}  // namespace

ValidatedAudio open_validated(const AudioSource& source) {
  check_source(source);
  SF_INFO sfi{};
  auto file = std::make_unique<SoundFile>(source, sfi);
  if (!file->get()) explain_open_failure(source, *file);
  check_header(source.name, sfi);

  ValidatedAudio validated;
  validated.info.sample_rate = sfi.samplerate;
  validated.info.channels = sfi.channels;
  validated.info.frames = header_frames(source, sfi);
  validated.info.format = describe_format(file->get(), sfi.format);
  validated.file = std::move(file);
  return validated;
}

AudioInfo validate_audio(const std::string& path) {
  return open_validated(AudioSource::file(path)).info;
}

AudioInfo validate_audio_bytes(const std::string& name, std::string_view bytes) {
  return open_validated(AudioSource::memory(name, bytes)).info;
}

}  // namespace corepool
