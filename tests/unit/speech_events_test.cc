// speech_spans() on hand-made probability sequences, chunks of 100 samples so
// that every expected boundary below is worked out by hand in its comment.
#include "audio/speech_events.h"

#include <random>

#include <gtest/gtest.h>

namespace corepool {
namespace {

SpeechRules rules(double hysteresis, int64_t min_speech, int64_t min_silence, int64_t pad) {
  SpeechRules r;
  r.threshold = 0.5;
  r.hysteresis = hysteresis;
  r.min_speech_samples = min_speech;
  r.min_silence_samples = min_silence;
  r.speech_pad_samples = pad;
  return r;
}

std::vector<std::pair<int64_t, int64_t>> bounds(const std::vector<SpeechSpan>& spans) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& s : spans) out.emplace_back(s.start, s.end);
  return out;
}

using Bounds = std::vector<std::pair<int64_t, int64_t>>;

TEST(SpeechSpans, HysteresisKeepsSpeechOnBetweenTheTwoThresholds) {
  const std::vector<float> probs{0.1f, 0.6f, 0.4f, 0.4f, 0.4f, 0.4f, 0.2f, 0.2f, 0.2f, 0.1f};
  // Off below 0.35: on at chunk 1 (100); 0.4 is no silence; silence from chunk
  // 6 (600) has lasted 200 = min_silence at chunk 8: the span is [100, 600).
  EXPECT_EQ(bounds(speech_spans(probs, 100, 1000, rules(0.15, 250, 200, 0))), (Bounds{{100, 600}}));
  // Without hysteresis 0.4 is silence from chunk 2 (200), closed at chunk 4:
  // [100, 200) is 100 long, not more than min_speech 250: dropped.
  EXPECT_TRUE(speech_spans(probs, 100, 1000, rules(0.0, 250, 200, 0)).empty());
}

TEST(SpeechSpans, SpansNoLongerThanMinSpeechAreDropped) {
  // On at 100, silence from 300, closed at 500: [100, 300) is 200 <= 250.
  EXPECT_TRUE(speech_spans({0, 0.9f, 0.9f, 0, 0, 0, 0}, 100, 700, rules(0.15, 250, 200, 0)).empty());
  // One more chunk: [100, 400) is 300 > 250.
  const auto spans = speech_spans({0, 0.9f, 0.8f, 0.7f, 0, 0, 0}, 100, 700, rules(0.15, 250, 200, 0));
  EXPECT_EQ(bounds(spans), (Bounds{{100, 400}}));
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_FLOAT_EQ(spans[0].score, 0.9f);
}

TEST(SpeechSpans, SilenceShorterThanMinSilenceDoesNotSplit) {
  // Silence at chunk 2 (200) is forgotten at chunk 3 (0.9); the next silence
  // from 500 reaches 200 at chunk 7: one span [0, 500).
  const std::vector<float> probs{0.9f, 0.9f, 0.1f, 0.9f, 0.9f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f};
  EXPECT_EQ(bounds(speech_spans(probs, 100, 1000, rules(0.15, 250, 200, 0))), (Bounds{{0, 500}}));
  // min_silence 100: a one-chunk silence still never closes (its own chunk sees
  // 0 elapsed, and chunk 3 forgets it); the second closes at chunk 6: the same.
  EXPECT_EQ(bounds(speech_spans(probs, 100, 1000, rules(0.15, 250, 100, 0))), (Bounds{{0, 500}}));
}

TEST(SpeechSpans, PaddingSplitsAShortGapAndClipsToTheAudio) {
  // Spans [100, 400) and [600, 800) (min_speech 50, min_silence 100); pad 120:
  // the first start 100 - 120 clips to 0; the gap 200 < 2 * 120 is split,
  // 100 each side: [0, 500) and [500, 800 + 120 = 920).
  const std::vector<float> probs{0, 0.9f, 0.9f, 0.9f, 0, 0, 0.9f, 0.9f, 0, 0, 0, 0};
  EXPECT_EQ(bounds(speech_spans(probs, 100, 1200, rules(0.15, 50, 100, 120))), (Bounds{{0, 500}, {500, 920}}));
  // Pad 30: gap 200 >= 60, each side grows by 30.
  EXPECT_EQ(bounds(speech_spans(probs, 100, 1200, rules(0.15, 50, 100, 30))), (Bounds{{70, 430}, {570, 830}}));
}

TEST(SpeechSpans, SpeechStillOnAtTheEndClosesAtTheAudiosLength) {
  // On at 200, never off; the audio is 350 long (the last chunk zero-padded):
  // [200, 350) is 150 > 50, padded by 30 at the start, clipped at the end.
  EXPECT_EQ(bounds(speech_spans({0, 0, 0.9f, 0.9f}, 100, 350, rules(0.15, 50, 100, 30))), (Bounds{{170, 350}}));
  EXPECT_TRUE(speech_spans({}, 100, 0, rules(0.15, 50, 100, 30)).empty());
}

// SpeechTracker fed the same probabilities one at a time.
struct Tracked {
  std::vector<SpeechSpan> spans;
  std::vector<int64_t> given_at;  // chunks pushed when each span came out (-1: at finish)
};

Tracked track(const std::vector<float>& probs, int64_t chunk, int64_t audio, const SpeechRules& r) {
  SpeechTracker tracker(chunk, r);
  Tracked t;
  for (size_t i = 0; i < probs.size(); ++i) {
    for (const SpeechSpan& s : tracker.push(probs[i])) {
      t.spans.push_back(s);
      t.given_at.push_back(static_cast<int64_t>(i) + 1);
    }
  }
  for (const SpeechSpan& s : tracker.finish(audio)) {
    t.spans.push_back(s);
    t.given_at.push_back(-1);
  }
  return t;
}

TEST(SpeechTracker, GivesAClosedSpanOutOnceTwoPadsOfSilenceFollowIt) {
  // Chunks of 100, pad 100: on at 100, silence from 400, closed at chunk 6
  // (600 - 400 = min_silence 200) as [100, 400), padded [0, 500). Final then:
  // nothing is on, and 700 heard is past 400 + 2 pads and 500 + a chunk.
  const std::vector<float> probs{0, 0.9f, 0.9f, 0.9f, 0, 0, 0, 0, 0, 0};
  const Tracked t = track(probs, 100, 1000, rules(0.15, 50, 200, 100));
  ASSERT_EQ(bounds(t.spans), (Bounds{{0, 500}}));
  EXPECT_EQ(t.given_at, (std::vector<int64_t>{7}));  // chunk 6 is the 7th pushed
  EXPECT_FLOAT_EQ(t.spans[0].score, 0.9f);
}

TEST(SpeechTracker, GivesOutExactlyWhatSpeechSpansFindsOnRandomSequences) {
  std::mt19937 rng(39);
  std::uniform_real_distribution<float> uniform(0, 1);
  for (int trial = 0; trial < 3000; ++trial) {
    const int64_t chunk = 1 + static_cast<int64_t>(rng() % 120);
    const size_t n = rng() % 60;
    std::vector<float> probs(n);
    float p = uniform(rng);
    for (float& x : probs) x = p = (rng() % 4 == 0) ? uniform(rng) : p;  // runs, like real speech
    const int64_t audio = n == 0 ? 0 : static_cast<int64_t>(n - 1) * chunk + 1 + static_cast<int64_t>(rng() % chunk);
    const SpeechRules r = rules(0.15 * (rng() % 3) / 2, rng() % 400, rng() % 400, rng() % 300);
    const std::vector<SpeechSpan> want = speech_spans(probs, chunk, audio, r);
    const Tracked got = track(probs, chunk, audio, r);
    ASSERT_EQ(bounds(got.spans), bounds(want)) << "trial " << trial;
    for (size_t i = 0; i < want.size(); ++i) ASSERT_FLOAT_EQ(got.spans[i].score, want[i].score) << "trial " << trial;
  }
}

}  // namespace
}  // namespace corepool
