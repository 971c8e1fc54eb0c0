// The ffmpeg command-line tool (installed by scripts/install-deps.sh), which
// the tests use to make files in formats corepool must read: an encoder that
// owes nothing to corepool's decoder.
#pragma once

#include <cstdlib>
#include <string>

namespace corepool::testing {

inline bool have_ffmpeg() { return std::system("ffmpeg -version > /dev/null 2>&1") == 0; }

// Runs `ffmpeg <args>` quietly, overwriting outputs; true on success.
inline bool ffmpeg(const std::string& args) {
  return std::system(("ffmpeg -nostdin -hide_banner -loglevel error -y " + args).c_str()) == 0;
}

}  // namespace corepool::testing
