// Speech-detector events from one label's per-chunk probabilities, the rules
// speech-detection users expect (Silero VAD's get_speech_timestamps, v5): on at
// p >= threshold, off only after p < threshold - hysteresis has lasted
// min_silence; events shorter than min_speech dropped; each side padded by
// speech_pad (halving a gap too short for both pads). speech_spans() is a pure
// function: the stateful batch driver calls it once a file's probabilities are
// all in; SpeechTracker applies the same rules as the probabilities come.
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

// The same rules live, one chunk's probability at a time: each span is given
// out as soon as nothing later can change it, so that the spans a stream gives
// out are exactly speech_spans() of all its probabilities. A span closes after
// min_silence; its padded end waits for the next kept span's start (a gap
// shorter than two pads is split) or for enough audio after it that no later
// span could be that close. Used by serve's stateful streams, one per label.
class SpeechTracker {
 public:
  SpeechTracker(int64_t chunk_samples, const SpeechRules& rules) : chunk_(chunk_samples), rules_(rules) {}
  // Chunk i's probability, i = the calls so far; the spans now final, in order.
  std::vector<SpeechSpan> push(float p);
  // The audio ended after audio_samples: the spans still open. Call once.
  std::vector<SpeechSpan> finish(int64_t audio_samples);

 private:
  void keep(SpeechSpan span, std::vector<SpeechSpan>& out);  // a span longer than min_speech, unpadded

  const int64_t chunk_;
  const SpeechRules rules_;
  int64_t chunks_ = 0;
  bool triggered_ = false;
  SpeechSpan current_;
  int64_t temp_end_ = 0;
  bool has_pending_ = false;  // pending_: kept, its start padded, its end not yet
  SpeechSpan pending_;
};

}  // namespace corepool
