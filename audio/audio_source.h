// Where encoded audio comes from: a file on disk (batch) or a buffer in memory
// (serve: a request body). MediaInput is FFmpeg's demuxer (libavformat) opened
// on either: avio_open for a path, an AVIOContext over the buffer, so that
// validation and decoding after the open are one code path. Used by
// audio_validation and AudioDecoder. A buffer must outlive every MediaInput on it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

struct AVFormatContext;
struct AVIOContext;

namespace corepool {

struct AudioSource {
  std::string name;        // the path, or what messages call the buffer ("request body")
  bool in_memory = false;  // true: `bytes` is the file; an empty buffer is still a buffer
  std::string_view bytes;  // not owned

  static AudioSource file(const std::string& path) { return {path, false, {}}; }
  static AudioSource memory(const std::string& name, std::string_view bytes) {
    return {name, true, bytes};
  }
};

// The read position of the AVIOContext over a buffer.
struct BufferCursor {
  std::string_view bytes;
  int64_t pos = 0;
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
  // The container's name, e.g. "QuickTime / MOV", once probed ("" before).
  const std::string& container() const { return container_; }
  // The probe was a guess (random bytes can look a little like MPEG audio):
  // if this input then fails, it was not audio at all.
  bool weakly_recognised() const { return probe_score_ <= kWeakProbeScore; }

  static constexpr int kWeakProbeScore = 25;  // AVPROBE_SCORE_RETRY

 private:
  bool open_io(const AudioSource& source);
  void fail(OpenFailure why, const std::string& text);

  BufferCursor cursor_;
  AVIOContext* io_ = nullptr;  // ours (a buffer or a file); avformat never closes it
  AVFormatContext* format_ = nullptr;
  OpenFailure failure_ = OpenFailure::kNone;
  std::string error_text_;
  std::string container_;
  int probe_score_ = 0;
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
