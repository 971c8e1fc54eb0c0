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

// The loop above, one chunk a call. A pending span is final once no span kept
// later can start within two pads of its end: no span is open, or the open one
// started that far away, and the audio reached that far (and a chunk past its
// padded end, so that the end is inside the audio whatever its length).
std::vector<SpeechSpan> SpeechTracker::push(float p) {
  std::vector<SpeechSpan> out;
  const double off = rules_.threshold - rules_.hysteresis;
  const int64_t at = chunks_++ * chunk_;
  if (p >= rules_.threshold && temp_end_) temp_end_ = 0;
  if (p >= rules_.threshold && !triggered_) {
    triggered_ = true;
    current_ = {at, 0, p};
  } else {
    if (triggered_) current_.score = std::max(current_.score, p);
    if (p < off && triggered_) {
      if (!temp_end_) temp_end_ = at;
      if (at - temp_end_ >= rules_.min_silence_samples) {
        current_.end = temp_end_;
        if (current_.end - current_.start > rules_.min_speech_samples) keep(current_, out);
        triggered_ = false;
        temp_end_ = 0;
      }
    }
  }
  const int64_t two_pads = 2 * rules_.speech_pad_samples;
  const int64_t heard = chunks_ * chunk_;
  if (has_pending_ && (!triggered_ || current_.start - pending_.end >= two_pads) &&
      heard - pending_.end >= std::max(two_pads, rules_.speech_pad_samples + chunk_)) {
    pending_.end += rules_.speech_pad_samples;
    out.push_back(pending_);
    has_pending_ = false;
  }
  return out;
}

std::vector<SpeechSpan> SpeechTracker::finish(int64_t audio_samples) {
  std::vector<SpeechSpan> out;
  if (triggered_ && audio_samples - current_.start > rules_.min_speech_samples) {
    current_.end = audio_samples;
    keep(current_, out);
  }
  triggered_ = false;
  if (has_pending_) {
    pending_.end = std::min(audio_samples, pending_.end + rules_.speech_pad_samples);
    out.push_back(pending_);
    has_pending_ = false;
  }
  return out;
}

// pad() above, for the pending span and this one: the gap between them says
// how much of it each gets. With none pending (the first span, or the last
// one went out at least two pads before this one starts), a whole pad.
void SpeechTracker::keep(SpeechSpan span, std::vector<SpeechSpan>& out) {
  const int64_t pad = rules_.speech_pad_samples;
  int64_t before = pad;
  if (has_pending_) {
    const int64_t gap = span.start - pending_.end;
    if (gap < 2 * pad) {
      pending_.end += gap / 2;
      before = gap / 2;
    } else {
      pending_.end += pad;
    }
    out.push_back(pending_);
  }
  span.start = std::max<int64_t>(0, span.start - before);
  pending_ = span;
  has_pending_ = true;
}

}  // namespace corepool
