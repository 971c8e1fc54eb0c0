// Where encoded audio comes from: a file on disk (batch), a buffer in memory
// (serve: a request body), standard input (`corepool batch -`), a URL or a
// capture device (serve's [[source]]s). MediaInput is
// FFmpeg's demuxer (libavformat) opened on any of them through an AVIOContext of
// ours, so that validation and decoding after the open are one code path. Used by
// audio_validation and AudioDecoder. A buffer must outlive every MediaInput on it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

struct AVFormatContext;
struct AVIOContext;
struct AVInputFormat;
struct AVDictionary;

namespace corepool {

// Headerless PCM on a pipe (`--raw s16le:16000:1`): FFmpeg's raw demuxer told
// what the bytes are, since there is nothing to probe.
struct RawPcm {
  std::string format;  // "s16le" or "f32le"; empty: not raw, probe the container
  int sample_rate = 0;
  int channels = 0;
  bool empty() const { return format.empty(); }
};

// Parses "FORMAT:RATE:CHANNELS" (FORMAT s16le or f32le). Throws
// std::invalid_argument saying what is expected (the caller names the flag).
RawPcm parse_raw_pcm(const std::string& spec);

struct AudioSource {
  std::string name;        // the path, or what messages call the buffer ("request body")
  bool in_memory = false;  // true: `bytes` is the file; an empty buffer is still a buffer
  std::string_view bytes;  // not owned
  bool pipe = false;       // true: read fd 0 front to back; nothing may seek, peek or reopen it
  RawPcm raw;              // with pipe: headerless PCM of this shape
  // A URL FFmpeg's own protocols open (serve's [[source]]: http(s), rtsp,
  // tcp, ...): `name` is the URL. Nested opens are allowed then (an HLS
  // playlist is a source too); the operator wrote the URL, not a client.
  bool url = false;
  int timeout_ms = 0;                 // with url: a read or connect silent this long fails (rw_timeout)
  std::function<bool()> interrupted;  // with url or fd: true aborts any blocking call (a stop, a deadline)
  // With pipe: read this descriptor (owned: closed with the input) instead
  // of stdin, non-blocking, waiting in poll() while `interrupted` says no
  // (serve's [[source]] on pipe:N, a FIFO or a device).
  int fd = -1;
  // A capture device of FFmpeg's libavdevice (serve's [[source]] on
  // alsa:DEVICE): `name` is the device, read without blocking; `interrupted`
  // is asked while it has nothing (a stop, a deadline).
  std::string device_input;  // the input format: "alsa"; empty: not a device
  int device_rate = 0;
  int device_channels = 0;

  static AudioSource file(const std::string& path) {
    AudioSource s;
    s.name = path;
    return s;
  }
  static AudioSource memory(const std::string& name, std::string_view bytes) {
    AudioSource s;
    s.name = name;
    s.in_memory = true;
    s.bytes = bytes;
    return s;
  }
  static AudioSource standard_input(const std::string& name, RawPcm raw = {}) {
    AudioSource s;
    s.name = name;
    s.pipe = true;
    s.raw = std::move(raw);
    return s;
  }
  static AudioSource descriptor(const std::string& name, int fd, std::function<bool()> interrupted) {
    AudioSource s;
    s.name = name;
    s.pipe = true;
    s.fd = fd;
    s.interrupted = std::move(interrupted);
    return s;
  }
  static AudioSource network(const std::string& url, int timeout_ms, std::function<bool()> interrupted) {
    AudioSource s;
    s.name = url;
    s.url = true;
    s.timeout_ms = timeout_ms;
    s.interrupted = std::move(interrupted);
    return s;
  }
  static AudioSource capture(const std::string& input, const std::string& device, int rate, int channels,
                             std::function<bool()> interrupted) {
    AudioSource s;
    s.name = device;
    s.device_input = input;
    s.device_rate = rate;
    s.device_channels = channels;
    s.interrupted = std::move(interrupted);
    return s;
  }
};

// The read position of the AVIOContext over a buffer.
struct BufferCursor {
  std::string_view bytes;
  int64_t pos = 0;
};

// The AVIOContext over a pipe: what has come through it.
struct PipeCursor {
  int fd = 0;
  int64_t bytes = 0;
  bool owned = false;                          // a descriptor of ours (AudioSource::fd): closed with the input
  const std::function<bool()>* interrupted = nullptr;  // set: fd is non-blocking, polled
};

// Why an open failed; decides the AudioErrorKind.
enum class OpenFailure {
  kNone,
  kIo,            // the file could not be opened or read (paths only)
  kUnrecognised,  // no demuxer claims the bytes
  kDamaged,       // a demuxer claimed them but could not read its own header
};

class MediaInput {
 public:
  // Probes and opens `source`, then reads enough of it to know its streams
  // (avformat_find_stream_info). Never throws: on failure get() is null and
  // failure() / error_text() say why (FFmpeg's own last log line, if it gave one).
  explicit MediaInput(const AudioSource& source);
  ~MediaInput();
  // Not movable either: the AVIOContext holds the address of cursor_.
  MediaInput(const MediaInput&) = delete;
  MediaInput& operator=(const MediaInput&) = delete;

  AVFormatContext* get() const { return format_; }
  OpenFailure failure() const { return failure_; }
  const std::string& error_text() const { return error_text_; }
  // Bytes read from a pipe so far (0 for files and buffers): 0 after a failed
  // probe means stdin was empty.
  int64_t pipe_bytes() const { return pipe_.bytes; }
  bool is_pipe() const { return is_pipe_; }
  // A capture device (AudioSource::capture): its reads return EAGAIN while
  // it has nothing yet, and interrupted() says when to stop waiting.
  bool is_device() const { return is_device_; }
  bool interrupted() const { return interrupted_ && interrupted_(); }
  // The container's name, e.g. "QuickTime / MOV", once probed ("" before).
  const std::string& container() const { return container_; }
  // The probe was a guess (random bytes can look a little like MPEG audio):
  // if this input then fails, it was not audio at all.
  bool weakly_recognised() const { return probe_score_ <= kWeakProbeScore; }

  static constexpr int kWeakProbeScore = 25;  // AVPROBE_SCORE_RETRY

 private:
  bool open_io(const AudioSource& source);
  void open_url(const AudioSource& source);
  void open_device(const AudioSource& source);
  static int check_interrupt(void* opaque);
  const AVInputFormat* probe(const AudioSource& source, AVDictionary** options);
  void fail(OpenFailure why, const std::string& text);

  BufferCursor cursor_;
  PipeCursor pipe_;
  bool is_pipe_ = false;
  bool is_device_ = false;
  AVIOContext* io_ = nullptr;  // ours (a buffer or a file); avformat never closes it
  AVFormatContext* format_ = nullptr;
  OpenFailure failure_ = OpenFailure::kNone;
  std::string error_text_;
  std::string container_;
  int probe_score_ = 0;
  std::function<bool()> interrupted_;  // url and device inputs: FFmpeg's interrupt callback asks it
};

// FFmpeg logs to stderr by default; corepool keeps one message per thread
// instead (the reason of the last failure) and never prints FFmpeg's lines.
// Installed once per process by MediaInput; exposed for the decoder.
void install_ffmpeg_log();
// The last error-level message FFmpeg logged on this thread, then forgets it.
std::string take_ffmpeg_message();
// av_strerror's text for an AVERROR code.
std::string ffmpeg_error_text(int code);

}  // namespace corepool
