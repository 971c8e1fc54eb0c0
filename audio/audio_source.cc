// MediaInput: FFmpeg's demuxer over a path, a buffer or stdin. All go through an
// AVIOContext of ours (read/seek callbacks over a file descriptor or over the
// buffer; stdin has no seek callback, so FFmpeg knows it cannot seek and a
// demuxer that must, an MP4 with its index at the end, fails cleanly) rather
// than an FFmpeg protocol: no URL parsing of file names ("a:b.wav"
// is a file, not a protocol), and io_open refuses every nested open, so a
// playlist or reference container (HLS, concat, MOV drefs) can never make the
// server read another file or the network. The buffer has the semantics of a
// read-only regular file: seeks past the end are allowed and read nothing.
#include "audio/audio_source.h"

extern "C" {
#include <libavdevice/avdevice.h>
#include <libavformat/avformat.h>
#include <libavutil/dict.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <libavutil/mem.h>
}

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>

namespace corepool {
namespace {

constexpr int kIoBufferBytes = 64 * 1024;

thread_local std::string t_last_message;

// Keeps the last error-level line of this thread; prints nothing.
void keep_message(void* avcl, int level, const char* fmt, va_list args) {
  if (level > AV_LOG_ERROR) return;
  char line[512];
  int print_prefix = 0;  // no "[mov,mp4 @ 0x55..]": a pointer means nothing to a user
  av_log_format_line2(avcl, level, fmt, args, line, sizeof(line), &print_prefix);
  std::string text(line);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (!text.empty()) t_last_message = text;
}

int read_buffer(void* opaque, uint8_t* out, int size) {
  BufferCursor& c = *static_cast<BufferCursor*>(opaque);
  const int64_t total = int64_t(c.bytes.size());
  if (size <= 0 || c.pos >= total) return AVERROR_EOF;
  const int n = int(std::min<int64_t>(size, total - c.pos));
  std::memcpy(out, c.bytes.data() + c.pos, size_t(n));
  c.pos += n;
  return n;
}

int64_t seek_buffer(void* opaque, int64_t offset, int whence) {
  BufferCursor& c = *static_cast<BufferCursor*>(opaque);
  const int64_t total = int64_t(c.bytes.size());
  if (whence & AVSEEK_SIZE) return total;
  int64_t base = 0;
  switch (whence & ~AVSEEK_FORCE) {
    case SEEK_SET: break;
    case SEEK_CUR: base = c.pos; break;
    case SEEK_END: base = total; break;
    default: return AVERROR(EINVAL);
  }
  // A damaged header can ask for any offset: no signed overflow, no negative position.
  if (offset > 0 && base > std::numeric_limits<int64_t>::max() - offset) return AVERROR(EINVAL);
  if (base + offset < 0) return AVERROR(EINVAL);
  c.pos = base + offset;
  return c.pos;
}

// The file descriptor rides in BufferCursor::pos's place: opaque is the fd + 1.
int fd_of(void* opaque) { return int(reinterpret_cast<intptr_t>(opaque)) - 1; }

int read_file(void* opaque, uint8_t* out, int size) {
  for (;;) {
    const ssize_t n = ::read(fd_of(opaque), out, size_t(size));
    if (n > 0) return int(n);
    if (n == 0) return AVERROR_EOF;
    if (errno != EINTR) return AVERROR(errno);
  }
}

int64_t seek_file(void* opaque, int64_t offset, int whence) {
  const int fd = fd_of(opaque);
  if (whence & AVSEEK_SIZE) {
    const off_t here = ::lseek(fd, 0, SEEK_CUR);
    const off_t end = ::lseek(fd, 0, SEEK_END);
    if (here < 0 || end < 0 || ::lseek(fd, here, SEEK_SET) < 0) return AVERROR(errno);
    return end;
  }
  const off_t at = ::lseek(fd, off_t(offset), whence & ~AVSEEK_FORCE);
  return at < 0 ? AVERROR(errno) : int64_t(at);
}

// A descriptor with an interrupt check (AudioSource::fd) is non-blocking: an
// empty read waits in poll() for 100 ms at a time, asking the check between.
int read_pipe(void* opaque, uint8_t* out, int size) {
  PipeCursor& p = *static_cast<PipeCursor*>(opaque);
  for (;;) {
    const ssize_t n = ::read(p.fd, out, size_t(size));
    if (n > 0) {
      p.bytes += n;
      return int(n);
    }
    if (n == 0) return AVERROR_EOF;
    if (errno == EAGAIN && p.interrupted) {
      if (*p.interrupted && (*p.interrupted)()) return AVERROR_EXIT;
      pollfd wait{p.fd, POLLIN, 0};
      ::poll(&wait, 1, 100);
      continue;
    }
    if (errno != EINTR) return AVERROR(errno);
  }
}

// FFmpeg's WAV and Wave64 demuxers probe the data of every 16-bit PCM stream
// for a compressed codec behind the PCM tag (MP3, AC-3, DTS), on up to 32
// packets, running every demuxer's probe again each time the data doubles:
// 21 of the 22 ms that opening a 3 s WAV took here (AMD EPYC Zen 5; perf of
// `corepool batch` on 200 such files: 30 % of its cpu). Probed on its first
// packet only, an MP3 behind a PCM header is still found (audio_ffmpeg_test);
// every other container keeps FFmpeg's default.
constexpr int kPcmProbePackets = 1;
bool probes_pcm_data(const AVInputFormat& format) {
  const std::string name = format.name ? format.name : "";
  return name == "wav" || name == "w64";
}

// Demuxers that would open another URL (HLS, DASH, concat, MOV references) get EPERM.
int refuse_nested_open(AVFormatContext*, AVIOContext**, const char*, int, AVDictionary**) {
  return AVERROR(EPERM);
}

}  // namespace

void install_ffmpeg_log() {
  static std::once_flag once;
  std::call_once(once, [] { av_log_set_callback(keep_message); });
}

std::string take_ffmpeg_message() {
  std::string text;
  text.swap(t_last_message);
  return text;
}

std::string ffmpeg_error_text(int code) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, text, sizeof(text));
  return text;
}

RawPcm parse_raw_pcm(const std::string& spec) {
  const std::string expected = "expected FORMAT:RATE:CHANNELS with FORMAT s16le or f32le, e.g. s16le:16000:1 "
                               "(rate 1000..768000 Hz, 1..32 channels)";
  const size_t a = spec.find(':');
  const size_t b = a == std::string::npos ? a : spec.find(':', a + 1);
  if (b == std::string::npos || spec.find(':', b + 1) != std::string::npos) throw std::invalid_argument(expected);
  RawPcm raw;
  raw.format = spec.substr(0, a);
  if (raw.format != "s16le" && raw.format != "f32le") throw std::invalid_argument(expected);
  auto number = [&](const std::string& text, int lo, int hi) {
    if (text.empty() || text.size() > 7 || text.find_first_not_of("0123456789") != std::string::npos) {
      throw std::invalid_argument(expected);
    }
    const int v = std::stoi(text);
    if (v < lo || v > hi) throw std::invalid_argument(expected);
    return v;
  };
  raw.sample_rate = number(spec.substr(a + 1, b - a - 1), 1000, 768000);
  raw.channels = number(spec.substr(b + 1), 1, 32);
  return raw;
}

// Raw PCM is named, not probed; anything else is probed from its first bytes.
const AVInputFormat* MediaInput::probe(const AudioSource& source, AVDictionary** options) {
  if (source.pipe && !source.raw.empty()) {
    probe_score_ = 100;  // AVPROBE_SCORE_MAX: the user said so
    av_dict_set_int(options, "sample_rate", source.raw.sample_rate, 0);
    av_dict_set(options, "ch_layout", (std::to_string(source.raw.channels) + "C").c_str(), 0);
    return av_find_input_format(source.raw.format.c_str());
  }
  const AVInputFormat* format = nullptr;
  const int probed = av_probe_input_buffer2(io_, &format, "", nullptr, 0, 0);
  if (probed < 0 || !format) {
    const bool io_failed = probed != AVERROR_INVALIDDATA && probed != AVERROR_EOF && !source.in_memory;
    fail(io_failed ? OpenFailure::kIo : OpenFailure::kUnrecognised,
         io_failed ? ffmpeg_error_text(probed) : "format not recognised");
    return nullptr;
  }
  probe_score_ = probed;
  return format;
}

MediaInput::MediaInput(const AudioSource& source) {
  install_ffmpeg_log();
  take_ffmpeg_message();
  if (source.url) {
    open_url(source);
    return;
  }
  if (!source.device_input.empty()) {
    open_device(source);
    return;
  }
  if (!open_io(source)) return;
  AVDictionary* options = nullptr;
  const AVInputFormat* format = probe(source, &options);
  if (!format) {
    av_dict_free(&options);
    return;
  }
  container_ = format->long_name ? format->long_name : format->name;
  format_ = avformat_alloc_context();
  if (!format_) {
    av_dict_free(&options);
    fail(OpenFailure::kIo, "out of memory");
    return;
  }
  format_->pb = io_;
  format_->flags |= AVFMT_FLAG_CUSTOM_IO;
  format_->io_open = refuse_nested_open;
  if (probes_pcm_data(*format)) format_->max_probe_packets = kPcmProbePackets;
  int rc = avformat_open_input(&format_, "", format, &options);  // frees format_ on failure
  av_dict_free(&options);
  if (rc >= 0) rc = avformat_find_stream_info(format_, nullptr);
  if (rc < 0 && weakly_recognised()) fail(OpenFailure::kUnrecognised, "format not recognised");
  else if (rc < 0) fail(OpenFailure::kDamaged, ffmpeg_error_text(rc));
}

int MediaInput::check_interrupt(void* opaque) {
  const auto& interrupted = static_cast<MediaInput*>(opaque)->interrupted_;
  return interrupted && interrupted() ? 1 : 0;
}

// FFmpeg's protocols over the URL. rw_timeout bounds every read and connect
// of the protocols that honour it (tcp, http, rtmp, ...); the interrupt
// callback covers the rest and a stop: no call blocks past either.
void MediaInput::open_url(const AudioSource& source) {
  static std::once_flag network;
  std::call_once(network, [] { avformat_network_init(); });
  interrupted_ = source.interrupted;
  format_ = avformat_alloc_context();
  if (!format_) return fail(OpenFailure::kIo, "out of memory");
  format_->interrupt_callback.callback = check_interrupt;
  format_->interrupt_callback.opaque = this;
  AVDictionary* options = nullptr;
  if (source.timeout_ms > 0) {
    av_dict_set_int(&options, "rw_timeout", int64_t(source.timeout_ms) * 1000, 0);
    if (source.name.rfind("rtsp", 0) == 0) av_dict_set_int(&options, "timeout", int64_t(source.timeout_ms) * 1000, 0);
  }
  int rc = avformat_open_input(&format_, source.name.c_str(), nullptr, &options);  // frees format_ on failure
  av_dict_free(&options);
  if (rc >= 0) rc = avformat_find_stream_info(format_, nullptr);
  if (rc < 0) {
    if (interrupted_ && interrupted_()) return fail(OpenFailure::kIo, "interrupted (stopped or timed out)");
    return fail(rc == AVERROR_INVALIDDATA ? OpenFailure::kUnrecognised : OpenFailure::kIo, ffmpeg_error_text(rc));
  }
  container_ = format_->iformat && format_->iformat->long_name ? format_->iformat->long_name : "";
  probe_score_ = 100;
}

// A capture device through libavdevice, opened non-blocking
// (AVFMT_FLAG_NONBLOCK: ALSA's SND_PCM_NONBLOCK), so that a device that
// stops delivering never holds a read: av_read_frame answers EAGAIN and
// the decoder asks interrupted() before it tries again. Its stream is
// described by the open itself (PCM at the rate and channels asked for),
// so there is no probing read.
void MediaInput::open_device(const AudioSource& source) {
  static std::once_flag devices;
  std::call_once(devices, [] { avdevice_register_all(); });
  is_device_ = true;
  interrupted_ = source.interrupted;
  const AVInputFormat* input = av_find_input_format(source.device_input.c_str());
  if (!input) return fail(OpenFailure::kIo, "this FFmpeg has no " + source.device_input + " input (libavdevice)");
  format_ = avformat_alloc_context();
  if (!format_) return fail(OpenFailure::kIo, "out of memory");
  format_->interrupt_callback.callback = check_interrupt;
  format_->interrupt_callback.opaque = this;
  format_->flags |= AVFMT_FLAG_NONBLOCK;
  AVDictionary* options = nullptr;
  av_dict_set_int(&options, "sample_rate", source.device_rate, 0);
  av_dict_set_int(&options, "channels", source.device_channels, 0);
  const int rc = avformat_open_input(&format_, source.name.c_str(), input, &options);  // frees format_ on failure
  av_dict_free(&options);
  if (rc < 0) {
    const std::string logged = take_ffmpeg_message();  // ALSA's reason: "cannot open audio device x (No such ...)"
    return fail(OpenFailure::kIo, logged.empty() ? ffmpeg_error_text(rc) : logged);
  }
  container_ = input->long_name ? input->long_name : input->name;
  probe_score_ = 100;
}

bool MediaInput::open_io(const AudioSource& source) {
  void* opaque = nullptr;
  if (source.pipe) {
    is_pipe_ = true;
    pipe_.fd = source.fd >= 0 ? source.fd : STDIN_FILENO;
    if (source.fd >= 0) {
      pipe_.owned = true;
      interrupted_ = source.interrupted;
      pipe_.interrupted = &interrupted_;
      ::fcntl(source.fd, F_SETFL, ::fcntl(source.fd, F_GETFL) | O_NONBLOCK);
    }
    opaque = &pipe_;
  } else if (source.in_memory) {
    cursor_.bytes = source.bytes;
    opaque = &cursor_;
  } else {
    const int fd = ::open(source.name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      fail(OpenFailure::kIo, std::strerror(errno));
      return false;
    }
    opaque = reinterpret_cast<void*>(intptr_t(fd) + 1);
  }
  auto* buffer = static_cast<unsigned char*>(av_malloc(kIoBufferBytes));
  if (buffer && source.pipe) {
    io_ = avio_alloc_context(buffer, kIoBufferBytes, 0, opaque, read_pipe, nullptr, nullptr);
  } else if (buffer) {
    io_ = source.in_memory
              ? avio_alloc_context(buffer, kIoBufferBytes, 0, opaque, read_buffer, nullptr, seek_buffer)
              : avio_alloc_context(buffer, kIoBufferBytes, 0, opaque, read_file, nullptr, seek_file);
  }
  if (!io_) {
    av_free(buffer);
    if (!source.in_memory && !source.pipe) ::close(fd_of(opaque));
    fail(OpenFailure::kIo, "out of memory");
    return false;
  }
  return true;
}

// Keeps FFmpeg's own line when it logged one ("moov atom not found"): it says
// more than the AVERROR code it returned.
void MediaInput::fail(OpenFailure why, const std::string& text) {
  if (format_) avformat_close_input(&format_);
  failure_ = why;
  const std::string logged = take_ffmpeg_message();
  error_text_ = why == OpenFailure::kDamaged && !logged.empty() ? logged : text;
}

MediaInput::~MediaInput() {
  if (format_) avformat_close_input(&format_);  // never closes io_ (AVFMT_FLAG_CUSTOM_IO)
  if (pipe_.owned) ::close(pipe_.fd);
  if (io_) {
    if (io_->read_packet == read_file) ::close(fd_of(io_->opaque));
    av_freep(&io_->buffer);
    avio_context_free(&io_);
  }
}

}  // namespace corepool
