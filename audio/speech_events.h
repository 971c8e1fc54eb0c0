// Speech-detector events from one label's per-chunk probabilities, the rules
// speech-detection users expect (Silero VAD's get_speech_timestamps, v5): on at
// p >= threshold, off only after p < threshold - hysteresis has lasted
// min_silence; events shorter than min_speech dropped; each side padded by
// speech_pad (halving a gap too short for both pads). A pure function: the
// stateful batch driver calls it once a file's probabilities are all in.
#pragma once

#include <cstdint>
#include <vector>

namespace corepool {

struct SpeechRules {
  double threshold = 0.5;
  double hysteresis = 0.15;   // off below threshold - hysteresis
  int64_t min_speech_samples = 4000;   // 250 ms at 16 kHz; kept if longer than this
  int64_t min_silence_samples = 1600;  // 100 ms
  int64_t speech_pad_samples = 480;    // 30 ms
};

struct SpeechSpan {
  int64_t start = 0;  // samples from the start of the audio
  int64_t end = 0;    // exclusive, at most the audio's length
  float score = 0;    // the highest chunk probability inside the unpadded span
};

// probs[i] is the probability of chunk i = samples [i * chunk, (i + 1) * chunk);
// audio_samples is the real length (the last chunk may be zero-padded).
std::vector<SpeechSpan> speech_spans(const std::vector<float>& probs, int64_t chunk_samples, int64_t audio_samples,
                                     const SpeechRules& rules);

}  // namespace corepool
