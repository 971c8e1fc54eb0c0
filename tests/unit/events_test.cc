// Unit tests for EventBuilder (audio/events.h): merging, thresholds, overlap
// arithmetic, clipping, emission order under shuffled arrival, bounded memory
// and error cases. Expected events come from a small offline oracle that sees
// all scores at once, so it shares no code or streaming logic with the builder.
#include "audio/events.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace corepool {

// In corepool itself (not the anonymous namespace) so that argument-dependent
// lookup finds them from std::vector's == and from gtest's printer; static
// keeps them private to this file. Exact comparison is intended: the builder
// and the oracle compute times with the same arithmetic.
static bool operator==(const Event& a, const Event& b) {
  return std::tie(a.start, a.end, a.label, a.score) == std::tie(b.start, b.end, b.label, b.score);
}

static std::ostream& operator<<(std::ostream& out, const Event& e) {
  return out << "{" << e.label << " " << e.start << ".." << e.end << " score " << e.score << "}";
}

namespace {

using Scores = std::vector<std::vector<float>>;  // [segment][label]

struct Params {
  std::vector<std::string> labels;
  std::vector<float> thresholds;
  double segment_seconds = 1.0;
  double hop_seconds = 1.0;
  std::optional<size_t> quiet;  // EventBuilder's quiet_label
};

// Collects what the builder emits; `builder` is wired to `events`.
struct Harness {
  explicit Harness(const Params& p)
      : builder(p.labels, p.thresholds, p.segment_seconds, p.hop_seconds,
                [this](const Event& e) { events.push_back(e); }, p.quiet) {}
  std::vector<Event> events;
  EventBuilder builder;
};

// Where each segment's span starts, all scores known: the middle hop (0 for
// segment 0), unless one of segments k-1, k is quiet (only the quiet label
// on) and the other sounds (another label on). Then the boundary moves to the
// quiet window's edge, but not past the sounding span's middle, and a sounding
// span moved on its left keeps its right edge.
std::vector<double> span_starts(const Params& p, const Scores& scores) {
  const double to_middle = (p.segment_seconds - p.hop_seconds) / 2;
  std::vector<int> kind(scores.size());  // 0 nothing on, 1 quiet, 2 sounding
  for (size_t i = 0; i < scores.size(); ++i) {
    for (size_t l = 0; l < p.labels.size(); ++l) {
      if (scores[i][l] >= p.thresholds[l]) kind[i] = std::max(kind[i], p.quiet == l ? 1 : 2);
    }
  }
  std::vector<double> start(scores.size() + 1);
  std::vector<bool> moved_left(scores.size(), false);
  for (size_t k = 0; k <= scores.size(); ++k) start[k] = k == 0 ? 0.0 : k * p.hop_seconds + to_middle;
  for (size_t k = 1; k < scores.size(); ++k) {
    if (kind[k - 1] == 1 && kind[k] == 2) {
      start[k] = std::min((k - 1) * p.hop_seconds + p.segment_seconds, start[k] + p.hop_seconds / 2);
      moved_left[k] = true;
    } else if (kind[k - 1] == 2 && kind[k] == 1 && !moved_left[k - 1]) {
      start[k] = std::max(k * p.hop_seconds, (start[k - 1] + start[k]) / 2);
    }
  }
  return start;
}

// The oracle: per label, every maximal run of on-segments is one event, from
// its first segment's span start to the next segment's span start (the
// duration for the last segment); sort by (start, label position); clip to the
// duration and drop empty ones.
std::vector<Event> expected_events(const Params& p, const Scores& scores, double duration) {
  const std::vector<double> start = span_starts(p, scores);
  std::vector<std::tuple<size_t, size_t, Event>> keyed;  // (first, label, event)
  for (size_t l = 0; l < p.labels.size(); ++l) {
    for (size_t i = 0; i < scores.size();) {
      if (!(scores[i][l] >= p.thresholds[l])) { ++i; continue; }
      size_t j = i;
      float best = scores[i][l];
      while (j + 1 < scores.size() && scores[j + 1][l] >= p.thresholds[l]) {
        best = std::max(best, scores[++j][l]);
      }
      Event e{start[i], j + 1 == scores.size() ? duration : start[j + 1], p.labels[l], best};
      e.start = std::min(e.start, duration);
      e.end = std::min(e.end, duration);
      if (e.end > e.start) keyed.emplace_back(i, l, e);
      i = j + 1;
    }
  }
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  std::vector<Event> out;
  for (auto& k : keyed) out.push_back(std::get<2>(k));
  return out;
}

std::vector<Event> run(const Params& p, const Scores& scores, const std::vector<uint64_t>& order,
                       double duration) {
  Harness h(p);
  for (uint64_t i : order) h.builder.add(i, scores[i]);
  EXPECT_EQ(h.builder.pending(), 0u);
  h.builder.finish(scores.size(), duration);
  return h.events;
}

std::vector<uint64_t> in_order(size_t n) {
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  return order;
}

// Scores that flip often and in long runs alike: each label holds a level for
// a random 1..max_run segments, so runs of every length and overlaps appear.
Scores random_scores(size_t segments, size_t labels, std::mt19937& rng, int max_run) {
  Scores scores(segments, std::vector<float>(labels));
  std::uniform_real_distribution<float> level(0.0f, 1.0f);
  std::uniform_int_distribution<int> run_length(1, max_run);
  for (size_t l = 0; l < labels; ++l) {
    for (size_t i = 0; i < segments;) {
      const bool on = level(rng) < 0.4f;
      for (int k = run_length(rng); k > 0 && i < segments; --k, ++i) {
        scores[i][l] = on ? 0.5f + level(rng) / 2 : level(rng) / 2;  // threshold 0.5
      }
    }
  }
  return scores;
}

Params numbered_labels(size_t n, float threshold = 0.5f) {
  Params p;
  for (size_t l = 0; l < n; ++l) p.labels.push_back("label" + std::to_string(l));
  p.thresholds.assign(n, threshold);
  return p;
}

TEST(EventBuilderTest, ConsecutiveOnSegmentsMergeIntoOneEventWithTheHighestScore) {
  Params p = numbered_labels(1);
  Harness h(p);
  h.builder.add(0, {0.1f});
  h.builder.add(1, {0.6f});
  h.builder.add(2, {0.9f});
  h.builder.add(3, {0.7f});
  h.builder.add(4, {0.2f});
  h.builder.finish(5, 5.0);
  EXPECT_EQ(h.events, (std::vector<Event>{{1.0, 4.0, "label0", 0.9f}}));
}

TEST(EventBuilderTest, AGapOfOneSegmentSplitsTwoEvents) {
  Params p = numbered_labels(1);
  Harness h(p);
  const Scores scores = {{0.8f}, {0.1f}, {0.7f}};
  for (uint64_t i = 0; i < scores.size(); ++i) h.builder.add(i, scores[i]);
  h.builder.finish(3, 3.0);
  EXPECT_EQ(h.events, (std::vector<Event>{{0.0, 1.0, "label0", 0.8f}, {2.0, 3.0, "label0", 0.7f}}));
}

TEST(EventBuilderTest, AScoreEqualToTheThresholdIsOnAndOneJustBelowIsOff) {
  Params p;
  p.labels = {"speech", "music"};
  p.thresholds = {0.3f, 0.7f};
  Harness h(p);
  h.builder.add(0, {0.3f, std::nextafter(0.7f, 0.0f)});
  h.builder.add(1, {std::nextafter(0.3f, 0.0f), 0.7f});
  h.builder.finish(2, 2.0);
  EXPECT_EQ(h.events, (std::vector<Event>{{0.0, 1.0, "speech", 0.3f}, {1.0, 2.0, "music", 0.7f}}));
}

TEST(EventBuilderTest, OverlappingSegmentsSpeakForTheHopAtTheirMiddle) {
  Params p = numbered_labels(1);
  p.segment_seconds = 1.0;
  p.hop_seconds = 0.5;
  Harness h(p);
  // Segments 2..4 hear [1.0, 2.0] .. [2.0, 3.0] and speak for their middle hops
  // [1.25, 1.75] .. [2.25, 2.75]; segment 7 hears [3.5, 4.5], speaks for [3.75, 4.25].
  const Scores scores = {{0}, {0}, {0.9f}, {0.6f}, {0.8f}, {0}, {0}, {0.55f}, {0}};
  for (uint64_t i = 0; i < scores.size(); ++i) h.builder.add(i, scores[i]);
  h.builder.finish(scores.size(), 5.0);
  EXPECT_EQ(h.events,
            (std::vector<Event>{{1.25, 2.75, "label0", 0.9f}, {3.75, 4.25, "label0", 0.55f}}));
}

TEST(EventBuilderTest, ALongContextPlacesTheBoundaryAtTheMiddleHop) {
  Params p;
  p.labels = {"speech", "music"};
  p.thresholds = {0.5f, 0.5f};
  p.segment_seconds = 2.0;
  p.hop_seconds = 0.5;
  Harness h(p);
  // 10 segments of 2 s over 6.5 s of audio (the last hears [4.5, 6.5]). Speech
  // in 0..3, music in 4..9: segment 3 speaks for [2.25, 2.75] and segment 4 for
  // [2.75, 3.25], so the two events meet at 2.75 s instead of overlapping by
  // 1.5 s; speech starts at 0 and music runs to the end.
  for (uint64_t i = 0; i < 10; ++i) {
    h.builder.add(i, i < 4 ? std::vector<float>{0.9f, 0.1f} : std::vector<float>{0.1f, 0.8f});
  }
  h.builder.finish(10, 6.5);
  EXPECT_EQ(h.events,
            (std::vector<Event>{{0.0, 2.75, "speech", 0.9f}, {2.75, 6.5, "music", 0.8f}}));
}

TEST(EventBuilderTest, TheLastSegmentSpeaksUpToTheEndOfTheAudio) {
  Params p = numbered_labels(2);
  p.hop_seconds = 0.5;
  Harness h(p);
  // 4 segments of 1 s, hop 0.5: the last hears [1.5, 2.5] (zero-padded past
  // 2.2, where the audio ends) and speaks for [1.75, 2.2].
  h.builder.add(0, {0.9f, 0.0f});
  h.builder.add(1, {0.9f, 0.0f});
  h.builder.add(2, {0.9f, 0.0f});
  h.builder.add(3, {0.9f, 0.8f});
  h.builder.finish(4, 2.2);
  EXPECT_EQ(h.events,
            (std::vector<Event>{{0.0, 2.2, "label0", 0.9f}, {1.75, 2.2, "label1", 0.8f}}));
}

// The quiet rule (EventBuilder's quiet_label), by hand. Two labels, speech
// and a quiet "silence"; segments of 2 s every 0.5 s unless said otherwise.
Params speech_and_silence(double segment, double hop) {
  Params p;
  p.labels = {"speech", "silence"};
  p.thresholds = {0.5f, 0.5f};
  p.segment_seconds = segment;
  p.hop_seconds = hop;
  p.quiet = 1;
  return p;
}
const std::vector<float> kSpeech = {0.9f, 0.1f};
const std::vector<float> kSilence = {0.1f, 0.9f};

std::vector<Event> events_of(const Params& p, const std::vector<std::vector<float>>& scores, double duration) {
  Harness h(p);
  for (uint64_t i = 0; i < scores.size(); ++i) h.builder.add(i, scores[i]);
  h.builder.finish(scores.size(), duration);
  return h.events;
}

TEST(EventBuilderTest, AQuietSegmentEndsASyllableAtTheStartOfAFileAtTheMiddleOfItsSpan) {
  // A 2.24 s file, a syllable in its first half second: segment 0 hears
  // [0, 2] and says speech, segment 1 hears [0.5, 2.5] and says silence.
  // Segment 0's span is [0, 1.25]; silence from 0.5 s on would take all but
  // 0.5 s of it, so the boundary stops at the span's middle, 0.625 s.
  const Params p = speech_and_silence(2.0, 0.5);
  EXPECT_EQ(events_of(p, {kSpeech, kSilence}, 2.24),
            (std::vector<Event>{{0.0, 0.625, "speech", 0.9f}, {0.625, 2.24, "silence", 0.9f}}));
  Params plain = p;
  plain.quiet.reset();  // without the rule: the middle hops meet at 1.25 s
  EXPECT_EQ(events_of(plain, {kSpeech, kSilence}, 2.24),
            (std::vector<Event>{{0.0, 1.25, "speech", 0.9f}, {1.25, 2.24, "silence", 0.9f}}));
}

TEST(EventBuilderTest, QuietWindowsMoveBothBoundariesOfASilenceByHalfAHop) {
  // Speech 0..3, silence 4..7, speech 8..11; 7.5 s. Middle hops would meet
  // at 2.75 and 4.75. Segment 4's window starts at 2.0, but segment 3's span
  // [2.25, 2.75] keeps its first half: 2.5. Segment 7's window ends at 5.5,
  // but segment 8's span [4.75, 5.25] keeps its second half: 5.0.
  const Params p = speech_and_silence(2.0, 0.5);
  std::vector<std::vector<float>> scores;
  for (int i = 0; i < 12; ++i) scores.push_back(i >= 4 && i < 8 ? kSilence : kSpeech);
  EXPECT_EQ(events_of(p, scores, 7.5),
            (std::vector<Event>{{0.0, 2.5, "speech", 0.9f}, {2.5, 5.0, "silence", 0.9f},
                                {5.0, 7.5, "speech", 0.9f}}));
}

TEST(EventBuilderTest, WithShortSegmentsTheQuietWindowEdgeIsTheBoundary) {
  // 1 s every 0.5 s, 3 s: speech 0..1, silence 2..3, speech 4. Silent windows
  // [1.0, 2.0] and [1.5, 2.5]: silence is exactly [1.0, 2.5] (middle hops
  // would say [1.25, 2.25]); each move is a quarter second, half a span.
  const Params p = speech_and_silence(1.0, 0.5);
  EXPECT_EQ(events_of(p, {kSpeech, kSpeech, kSilence, kSilence, kSpeech}, 3.0),
            (std::vector<Event>{{0.0, 1.0, "speech", 0.9f}, {1.0, 2.5, "silence", 0.9f},
                                {2.5, 3.0, "speech", 0.9f}}));
}

TEST(EventBuilderTest, ASoundingSegmentBetweenTwoQuietOnesGivesUpOneSideOnly) {
  // Silence, silence, speech, silence, silence; 4 s. Segment 2's span
  // [1.75, 2.25] loses its first half to the silence before it and keeps the
  // rest: the speech is not erased.
  const Params p = speech_and_silence(2.0, 0.5);
  EXPECT_EQ(events_of(p, {kSilence, kSilence, kSpeech, kSilence, kSilence}, 4.0),
            (std::vector<Event>{{0.0, 2.0, "silence", 0.9f}, {2.0, 2.25, "speech", 0.9f},
                                {2.25, 4.0, "silence", 0.9f}}));
}

TEST(EventBuilderTest, ASegmentWithTheQuietLabelAndAnotherOnSounds) {
  // Segment 1 is over both thresholds: it sounds, so the silence before it
  // takes the first half of its span [1.25, 1.75] (were it quiet, nothing
  // would move), and the silence after it takes nothing, as it gave a side.
  const Params p = speech_and_silence(2.0, 0.5);
  EXPECT_EQ(events_of(p, {kSilence, {0.6f, 0.7f}, kSilence}, 3.0),
            (std::vector<Event>{{0.0, 3.0, "silence", 0.9f}, {1.5, 1.75, "speech", 0.6f}}));
}

TEST(EventBuilderTest, WithAQuietLabelShuffledArrivalsMatchTheOracle) {
  std::mt19937 rng(20261130);
  for (const auto& [segment, hop] : {std::pair{2.0, 0.5}, std::pair{1.0, 0.5}, std::pair{1.0, 1.0}}) {
    Params p = numbered_labels(3);
    p.segment_seconds = segment;
    p.hop_seconds = hop;
    p.quiet = 2;
    // One label on per segment, as a softmax at 0.5 gives, in runs of 1..6.
    Scores scores;
    std::uniform_int_distribution<int> label(0, 2), run_length(1, 6);
    while (scores.size() < 2000) {
      const int on = label(rng);
      for (int k = run_length(rng); k > 0; --k) {
        scores.push_back({0.1f, 0.1f, 0.1f});
        scores.back()[on] = 0.8f;
      }
    }
    const double duration = hop * (scores.size() - 1) + segment / 2;
    const std::vector<Event> expected = expected_events(p, scores, duration);
    ASSERT_GT(expected.size(), 300u);
    for (size_t k = 1; k < expected.size(); ++k) {  // the spans still tile the file
      ASSERT_EQ(expected[k - 1].end, expected[k].start) << "at event " << k;
    }
    EXPECT_EQ(run(p, scores, in_order(scores.size()), duration), expected);
    std::vector<uint64_t> order = in_order(scores.size());
    std::shuffle(order.begin(), order.end(), rng);
    EXPECT_EQ(run(p, scores, order, duration), expected);
  }
}

// Only events still open at finish() can reach past the audio (the segmenter
// pads the last segment only), so only they are clipped or dropped.
TEST(EventBuilderTest, AnEventThatStartsAtOrAfterTheDurationIsDropped) {
  for (double duration : {1.0, 0.9}) {
    Params p = numbered_labels(3);
    p.hop_seconds = 0.5;
    Harness h(p);
    h.builder.add(0, {0.9f, 0.0f, 0.0f});
    h.builder.add(1, {0.9f, 0.0f, 0.7f});
    h.builder.add(2, {0.9f, 0.8f, 0.7f});  // label1 starts at 1.25, not before the end
    h.builder.finish(3, duration);
    EXPECT_EQ(h.events, (std::vector<Event>{{0.0, duration, "label0", 0.9f},
                                            {0.75, duration, "label2", 0.7f}}))
        << "duration " << duration;
  }
}

TEST(EventBuilderTest, EventsWithTheSameStartLeaveInLabelOrder) {
  Params p;
  p.labels = {"dog", "cat", "bird"};
  p.thresholds = {0.5f, 0.5f, 0.5f};
  Harness h(p);
  // All three start at segment 1; bird closes first, dog last, yet dog leads.
  h.builder.add(0, {0.0f, 0.0f, 0.0f});
  h.builder.add(1, {0.6f, 0.7f, 0.8f});
  h.builder.add(2, {0.6f, 0.7f, 0.0f});
  h.builder.add(3, {0.6f, 0.0f, 0.0f});
  EXPECT_TRUE(h.events.empty()) << "cat and bird must wait for the open dog event";
  h.builder.add(4, {0.0f, 0.0f, 0.0f});
  EXPECT_EQ(h.events, (std::vector<Event>{{1.0, 4.0, "dog", 0.6f},
                                          {1.0, 3.0, "cat", 0.7f},
                                          {1.0, 2.0, "bird", 0.8f}}));
  h.builder.finish(5, 5.0);
  EXPECT_EQ(h.events.size(), 3u);
}

TEST(EventBuilderTest, AClosedEventWaitsForAnEarlierOpenEventThenFollowsIt) {
  Params p;
  p.labels = {"rain", "thunder"};
  p.thresholds = {0.5f, 0.5f};
  Harness h(p);
  h.builder.add(0, {0.9f, 0.0f});
  h.builder.add(1, {0.9f, 0.8f});
  h.builder.add(2, {0.9f, 0.0f});  // thunder closed, but rain (started earlier) is open
  EXPECT_TRUE(h.events.empty());
  h.builder.add(3, {0.0f, 0.0f});  // rain closes: both can go, rain first
  EXPECT_EQ(h.events, (std::vector<Event>{{0.0, 3.0, "rain", 0.9f}, {1.0, 2.0, "thunder", 0.8f}}));
}

TEST(EventBuilderTest, AnEventIsEmittedAsSoonAsItClosesWhenNothingEarlierIsOpen) {
  Params p;
  p.labels = {"rain", "thunder"};
  p.thresholds = {0.5f, 0.5f};
  Harness h(p);
  h.builder.add(0, {0.0f, 0.9f});
  h.builder.add(1, {0.9f, 0.9f});
  h.builder.add(2, {0.9f, 0.0f});  // thunder started first and closed: out at once
  EXPECT_EQ(h.events, (std::vector<Event>{{0.0, 2.0, "thunder", 0.9f}}));
}

TEST(EventBuilderTest, AnOutOfOrderSegmentWaitsForItsPredecessor) {
  Params p = numbered_labels(1);
  Harness h(p);
  h.builder.add(0, {0.9f});
  h.builder.add(2, {0.1f});  // would close the event, but segment 1 is unknown
  h.builder.add(3, {0.1f});
  EXPECT_EQ(h.builder.pending(), 2u);
  EXPECT_TRUE(h.events.empty());
  h.builder.add(1, {0.7f});
  EXPECT_EQ(h.builder.pending(), 0u);
  EXPECT_EQ(h.events, (std::vector<Event>{{0.0, 2.0, "label0", 0.9f}}));
  h.builder.finish(4, 4.0);
  EXPECT_EQ(h.events.size(), 1u);
}

TEST(EventBuilderTest, ShuffledArrivalsGiveTheSameEventsAsInOrderArrivals) {
  std::mt19937 rng(20240611);
  Params p = numbered_labels(16);
  p.segment_seconds = 1.0;
  p.hop_seconds = 0.5;
  const size_t kSegments = 1500;
  const double duration = 0.5 * (kSegments - 1) + 0.7;  // last segment is the padded tail
  const Scores scores = random_scores(kSegments, p.labels.size(), rng, 12);
  const std::vector<Event> expected = expected_events(p, scores, duration);
  ASSERT_GT(expected.size(), 500u) << "the scores should make plenty of events";

  EXPECT_EQ(run(p, scores, in_order(kSegments), duration), expected);
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<uint64_t> order = in_order(kSegments);
    std::shuffle(order.begin(), order.end(), rng);
    EXPECT_EQ(run(p, scores, order, duration), expected) << "permutation " << trial;
  }
}

TEST(EventBuilderTest, EmittedEventsAreStrictlyOrderedByStartThenLabel) {
  std::mt19937 rng(7);
  Params p = numbered_labels(8);
  const Scores scores = random_scores(1200, p.labels.size(), rng, 30);
  std::vector<uint64_t> order = in_order(scores.size());
  std::shuffle(order.begin(), order.end(), rng);
  const std::vector<Event> events = run(p, scores, order, 1200.0);
  ASSERT_GT(events.size(), 100u);
  for (size_t k = 1; k < events.size(); ++k) {
    EXPECT_LT(std::tie(events[k - 1].start, events[k - 1].label),
              std::tie(events[k].start, events[k].label))  // "labelN" sort like N for N < 10
        << "at event " << k;
  }
}

TEST(EventBuilderTest, PendingSegmentsStayWithinTheReorderWindow) {
  std::mt19937 rng(99);
  Params p = numbered_labels(4);
  const size_t kSegments = 5000, kWindow = 16;
  const Scores scores = random_scores(kSegments, p.labels.size(), rng, 5);
  std::vector<uint64_t> order = in_order(kSegments);
  for (size_t b = 0; b < kSegments; b += kWindow) {  // out of order only inside each window
    std::shuffle(order.begin() + b, order.begin() + std::min(b + kWindow, kSegments), rng);
  }
  Harness h(p);
  size_t most_pending = 0;
  for (uint64_t i : order) {
    h.builder.add(i, scores[i]);
    most_pending = std::max(most_pending, h.builder.pending());
  }
  EXPECT_LT(most_pending, kWindow);
  EXPECT_EQ(h.builder.pending(), 0u);
  h.builder.finish(kSegments, static_cast<double>(kSegments));
  EXPECT_EQ(h.events, expected_events(p, scores, kSegments));
}

// The closed backlog is private; what shows it stays empty is that every event
// that can be final is already out after each add().
TEST(EventBuilderTest, ClosedEventsDoNotPileUpWhenNothingEarlierIsOpen) {
  Params p = numbered_labels(3);
  Harness h(p);
  const uint64_t kSegments = 30000;
  for (uint64_t i = 0; i < kSegments; ++i) {
    std::vector<float> scores(3, 0.0f);
    scores[i % 3] = 0.9f;  // one label at a time, changing every segment
    h.builder.add(i, scores);
    // Segment i closed the one-segment event of segment i - 1.
    ASSERT_EQ(h.events.size(), i) << "after segment " << i;
  }
  h.builder.finish(kSegments, static_cast<double>(kSegments));
  EXPECT_EQ(h.events.size(), kSegments);
}

TEST(EventBuilderTest, AddingTheSameIndexTwiceIsALogicError) {
  Params p = numbered_labels(1);
  Harness h(p);
  h.builder.add(0, {0.9f});
  h.builder.add(5, {0.9f});
  EXPECT_THROW(h.builder.add(0, {0.9f}), std::logic_error);  // already folded
  EXPECT_THROW(h.builder.add(5, {0.9f}), std::logic_error);  // still waiting
  EXPECT_EQ(h.builder.pending(), 1u);
}

TEST(EventBuilderTest, AWrongNumberOfScoresIsAnInvalidArgumentAndChangesNothing) {
  Params p = numbered_labels(2);
  Harness h(p);
  EXPECT_THROW(h.builder.add(0, {0.9f}), std::invalid_argument);
  EXPECT_THROW(h.builder.add(0, {0.9f, 0.9f, 0.9f}), std::invalid_argument);
  h.builder.add(0, {0.9f, 0.0f});  // index 0 is still free
  h.builder.finish(1, 1.0);
  EXPECT_EQ(h.events, (std::vector<Event>{{0.0, 1.0, "label0", 0.9f}}));
}

TEST(EventBuilderTest, MismatchedThresholdsOrNonPositiveLengthsAreInvalidArguments) {
  const auto make = [](std::vector<float> thresholds, double segment, double hop) {
    EventBuilder({"a", "b"}, std::move(thresholds), segment, hop, [](const Event&) {});
  };
  EXPECT_THROW(make({0.5f}, 1.0, 0.5), std::invalid_argument);
  EXPECT_THROW(make({0.5f, 0.5f}, 0.0, 0.5), std::invalid_argument);
  EXPECT_THROW(make({0.5f, 0.5f}, 1.0, 0.0), std::invalid_argument);
  EXPECT_NO_THROW(make({0.5f, 0.5f}, 1.0, 0.5));
  EXPECT_THROW(EventBuilder({"a", "b"}, {0.5f, 0.5f}, 1.0, 0.5, [](const Event&) {}, 2),
               std::invalid_argument);  // the quiet label must be one of the labels
}

TEST(EventBuilderTest, FinishingWithAMissingSegmentNamesIt) {
  Params p = numbered_labels(1);
  Harness h(p);
  for (uint64_t i : {0, 1, 2, 4, 5}) h.builder.add(i, {0.9f});
  try {
    h.builder.finish(6, 6.0);
    FAIL() << "finish must refuse a missing segment";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("segment 3 "), std::string::npos) << e.what();
  }
  EXPECT_TRUE(h.events.empty());
}

TEST(EventBuilderTest, FinishingBelowAnAddedIndexIsALogicError) {
  Params p = numbered_labels(1);
  Harness folded(p);
  for (uint64_t i = 0; i < 4; ++i) folded.builder.add(i, {0.9f});
  EXPECT_THROW(folded.builder.finish(3, 3.0), std::logic_error);

  Harness waiting(p);
  for (uint64_t i : {0, 1, 2, 7}) waiting.builder.add(i, {0.9f});
  EXPECT_THROW(waiting.builder.finish(3, 3.0), std::logic_error);
  EXPECT_TRUE(waiting.events.empty());
}

TEST(EventBuilderTest, AddOrFinishAfterFinishIsALogicError) {
  Params p = numbered_labels(1);
  Harness h(p);
  h.builder.add(0, {0.9f});
  h.builder.finish(1, 1.0);
  EXPECT_THROW(h.builder.add(1, {0.9f}), std::logic_error);
  EXPECT_THROW(h.builder.finish(1, 1.0), std::logic_error);
  EXPECT_EQ(h.events.size(), 1u);
}

TEST(EventBuilderTest, ZeroSegmentsFinishCleanlyButOneMissingSegmentDoesNot) {
  Params p = numbered_labels(2);
  Harness empty(p);
  EXPECT_NO_THROW(empty.builder.finish(0, 0.0));
  EXPECT_TRUE(empty.events.empty());
  Harness missing(p);
  EXPECT_THROW(missing.builder.finish(1, 1.0), std::logic_error);
}

}  // namespace
}  // namespace corepool
