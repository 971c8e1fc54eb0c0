// Speech from Debian's espeak-ng, for the tagger's training and test audio and
// the demo. espeak-ng runs as a child process (argv, never a shell) writing WAV
// to a pipe; the bytes are decoded and resampled in memory with the pipeline's
// own AudioStream. Build and test time only: the service never calls it.
#pragma once

#include <string>
#include <vector>

namespace corepool::synth {

struct Voice {
  std::string language = "en";  // espeak-ng voice, e.g. "en", "de", "en-us"
  std::string variant;          // "" or an espeak-ng variant, e.g. "m3", "f2", "klatt"
  int words_per_minute = 160;   // -s
  int pitch = 50;               // -p, 0..99
  int word_gap_10ms = 0;        // -g, extra pause between words
};

// Speaks `text` with `voice` and returns mono samples at `rate`. Throws
// std::runtime_error naming the voice if espeak-ng is missing, fails or says nothing.
std::vector<float> speak(const std::string& text, const Voice& voice, int rate);

}  // namespace corepool::synth
