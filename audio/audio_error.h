// The one error type of the audio front end (validation, decoding, resampling).
// Its message is a single line that starts with the file's path (or the name of
// an in-memory buffer), e.g.
// "data/x.txt: not an audio file (format not recognised)".
// Its kind() is what a caller maps to an outcome (serve: an HTTP status code).
#pragma once

#include <stdexcept>
#include <string>

namespace corepool {

enum class AudioErrorKind {
  kNotAudio,  // no format FFmpeg recognises (text, random bytes), or a file without
              // an audio stream (JPEG, a video-only MP4) -> HTTP 415
  kInvalid,   // audio, but unusable: empty, 0 Hz / absurd rate, too many channels,
              // no frames, truncated or damaged header, NaN/Inf sample, no such
              // --audio-stream -> HTTP 400
  kIo,        // the file system failed us: missing, permissions, a directory,
              // a read error (file paths only; a buffer in memory never gives one)
};

struct AudioError : std::runtime_error {
  AudioError(const std::string& path, const std::string& reason,
             AudioErrorKind kind = AudioErrorKind::kInvalid)
      : std::runtime_error(path + ": " + reason), kind_(kind) {}

  AudioErrorKind kind() const { return kind_; }

 private:
  AudioErrorKind kind_;
};

}  // namespace corepool
