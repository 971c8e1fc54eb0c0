// speech_spans(): Silero's get_speech_timestamps loop (utils_vad.py), with
// max_speech_duration_s = inf, in integer samples so that a test can check it
// against hand-computed boundaries exactly. `temp_end` is where the current
// silence began: a probability back at or above the threshold forgets it; a
// probability between the two thresholds neither ends nor extends the silence.
#include "audio/speech_events.h"

#include <algorithm>

namespace corepool {
namespace {

// Padding, as Silero applies it after the loop: a gap shorter than two pads is
// split evenly between its two neighbours.
void pad(std::vector<SpeechSpan>& spans, int64_t pad_samples, int64_t audio_samples) {
  for (size_t i = 0; i < spans.size(); ++i) {
    if (i == 0) spans[i].start = std::max<int64_t>(0, spans[i].start - pad_samples);
    if (i + 1 < spans.size()) {
      const int64_t gap = spans[i + 1].start - spans[i].end;
      if (gap < 2 * pad_samples) {
        spans[i].end += gap / 2;
        spans[i + 1].start = std::max<int64_t>(0, spans[i + 1].start - gap / 2);
      } else {
        spans[i].end = std::min(audio_samples, spans[i].end + pad_samples);
        spans[i + 1].start = std::max<int64_t>(0, spans[i + 1].start - pad_samples);
      }
    } else {
      spans[i].end = std::min(audio_samples, spans[i].end + pad_samples);
    }
  }
}

}  // namespace

std::vector<SpeechSpan> speech_spans(const std::vector<float>& probs, int64_t chunk_samples, int64_t audio_samples,
                                     const SpeechRules& rules) {
  const double off = rules.threshold - rules.hysteresis;
  std::vector<SpeechSpan> spans;
  bool triggered = false;
  SpeechSpan current;
  int64_t temp_end = 0;  // 0 = no silence pending (Silero's convention: a silence never starts at sample 0)
  for (size_t i = 0; i < probs.size(); ++i) {
    const float p = probs[i];
    const int64_t at = static_cast<int64_t>(i) * chunk_samples;
    if (p >= rules.threshold && temp_end) temp_end = 0;
    if (p >= rules.threshold && !triggered) {
      triggered = true;
      current = {at, 0, p};
      continue;
    }
    if (triggered) current.score = std::max(current.score, p);
    if (p < off && triggered) {
      if (!temp_end) temp_end = at;
      if (at - temp_end < rules.min_silence_samples) continue;
      current.end = temp_end;
      if (current.end - current.start > rules.min_speech_samples) spans.push_back(current);
      triggered = false;
      temp_end = 0;
    }
  }
  if (triggered && audio_samples - current.start > rules.min_speech_samples) {
    current.end = audio_samples;
    spans.push_back(current);
  }
  pad(spans, rules.speech_pad_samples, audio_samples);
  return spans;
}

}  // namespace corepool
