// The one error type of the audio front end (validation, decoding, resampling).
// Its message is a single line that starts with the file's path, e.g.
// "data/x.wav: not an audio file (File contains data in an unknown format.)".
#pragma once

#include <stdexcept>
#include <string>

namespace corepool {

struct AudioError : std::runtime_error {
  AudioError(const std::string& path, const std::string& reason)
      : std::runtime_error(path + ": " + reason) {}
};

}  // namespace corepool
