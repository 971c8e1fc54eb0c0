// validate_audio(): the header checks of stage 1. Asks the OS first (missing,
// permissions, directory) so those reasons are exact, then libsndfile for the
// format. Peeks at a WAV's RIFF header itself where libsndfile hides a problem
// (0 Hz refused with a generic message; truncated data silently "fixed").
// Opens and closes its own handles; nothing outlives the call.
#include "worker/audio_validation.h"

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

struct SfCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
using SndFilePtr = std::unique_ptr<SNDFILE, SfCloser>;

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

// Walks the chunks up to "data". Returns false for anything that is not a
// little-endian RIFF/WAVE file; a damaged walk just leaves fields unset.
bool peek_riff(const std::string& path, RiffHeader& h) {
  std::ifstream in(path, std::ios::binary);
  unsigned char buf[16];
  if (!in.read(reinterpret_cast<char*>(buf), 12) || std::memcmp(buf, "RIFF", 4) != 0 ||
      std::memcmp(buf + 8, "WAVE", 4) != 0) {
    return false;
  }
  for (int chunk = 0; chunk < 64 && in.read(reinterpret_cast<char*>(buf), 8); ++chunk) {
    const uint32_t size = le32(buf + 4);
    if (std::memcmp(buf, "data", 4) == 0) {
      h.has_data = true;
      h.data_offset = int64_t(in.tellg());
      h.data_bytes = size;
      return true;
    }
    if (std::memcmp(buf, "fmt ", 4) == 0 && size >= 16) {
      if (!in.read(reinterpret_cast<char*>(buf), 16)) return true;
      h.has_fmt = true;
      h.format_tag = le16(buf);
      h.channels = le16(buf + 2);
      h.sample_rate = le32(buf + 4);
      h.block_align = le16(buf + 12);
      in.seekg(std::streamoff(size - 16 + (size & 1)), std::ios::cur);
    } else {
      in.seekg(std::streamoff(size) + (size & 1), std::ios::cur);  // chunks are padded to even
    }
  }
  return true;
}

// Missing, unreadable, directory, special or 0-byte file. O_NONBLOCK so that a
// FIFO is rejected instead of blocking the caller until someone writes to it.
void check_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) throw AudioError(path, "no such file");
    if (err == EACCES || err == EPERM) throw AudioError(path, "permission denied");
    throw AudioError(path, std::string("cannot open (") + std::strerror(err) + ")");
  }
  struct stat st {};
  const int rc = ::fstat(fd, &st);
  ::close(fd);
  if (rc != 0) throw AudioError(path, std::string("cannot stat (") + std::strerror(errno) + ")");
  if (S_ISDIR(st.st_mode)) throw AudioError(path, "is a directory, not an audio file");
  if (!S_ISREG(st.st_mode)) throw AudioError(path, "not a regular file");
  if (st.st_size == 0) throw AudioError(path, "empty file (0 bytes)");
}

// libsndfile refused the file. It refuses a 0 Hz WAV with "SF_INFO struct
// incomplete", which would send a user looking in the wrong place.
[[noreturn]] void explain_open_failure(const std::string& path) {
  const std::string sf_reason = sf_strerror(nullptr);
  RiffHeader h;
  if (peek_riff(path, h) && h.has_fmt) {
    if (h.sample_rate == 0) throw AudioError(path, "sample rate is 0 Hz");
    if (h.channels == 0) throw AudioError(path, "header says 0 channels");
  }
  throw AudioError(path, "not an audio file (" + sf_reason + ")");
}

void check_header(const std::string& path, const SF_INFO& sfi) {
  if (sfi.samplerate == 0) throw AudioError(path, "sample rate is 0 Hz");
  if (sfi.samplerate < kMinSampleRate || sfi.samplerate > kMaxSampleRate) {
    throw AudioError(path, "sample rate " + std::to_string(sfi.samplerate) + " Hz is outside " +
                               std::to_string(kMinSampleRate) + ".." +
                               std::to_string(kMaxSampleRate) + " Hz");
  }
  if (sfi.channels <= 0) throw AudioError(path, "header says 0 channels");
  if (sfi.channels > kMaxChannels) {
    throw AudioError(path, std::to_string(sfi.channels) + " channels (at most " +
                               std::to_string(kMaxChannels) + " supported)");
  }
  if (sfi.frames <= 0) throw AudioError(path, "no audio frames (empty)");
  // libsndfile's "length unknown". For a regular file that means the end is
  // missing (seen with truncated Ogg): no length to check the decode against.
  if (sfi.frames == SF_COUNT_MAX) throw AudioError(path, "length unknown (truncated or damaged)");
}

// libsndfile clamps a WAV's data size to what the file holds, so a truncated
// WAV would look whole and AudioStream could never notice. Report the frames
// the header claims instead. Only for PCM/float, where block_align is one
// frame, and not for the 0 / 0xFFFFFFFF sizes streaming writers leave behind.
int64_t header_frames(const std::string& path, const SF_INFO& sfi) {
  if ((sfi.format & SF_FORMAT_TYPEMASK) != SF_FORMAT_WAV) return sfi.frames;
  RiffHeader h;
  if (!peek_riff(path, h) || !h.has_fmt || !h.has_data || h.block_align == 0) return sfi.frames;
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

AudioInfo validate_audio(const std::string& path) {
  check_file(path);
  SF_INFO sfi{};
  SndFilePtr file(sf_open(path.c_str(), SFM_READ, &sfi));
  if (!file) explain_open_failure(path);
  check_header(path, sfi);

  AudioInfo info;
  info.sample_rate = sfi.samplerate;
  info.channels = sfi.channels;
  info.frames = header_frames(path, sfi);
  info.format = describe_format(file.get(), sfi.format);
  return info;
}

}  // namespace corepool
