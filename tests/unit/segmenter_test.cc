// Tests of Segmenter (audio/segmenter.h): exact segment starts and contents
// for overlapping, contiguous and gapped hops, the padded tail rules, and the
// bound on buffered samples. Samples carry their stream position as value, so
// every check says exactly which samples a segment holds.
#include "audio/segmenter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

namespace corepool {
namespace {

std::vector<float> ramp(size_t n, float first = 0) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// All segments, next() after the push and finish() at the end.
std::vector<Segment> segment_all(Segmenter& s, const std::vector<float>& samples) {
  std::vector<Segment> out;
  Segment seg;
  s.push(samples.data(), samples.size());
  while (s.next(seg)) out.push_back(seg);
  while (s.finish(seg)) out.push_back(seg);
  return out;
}

TEST(SegmenterTest, ZeroLengthOrHopIsRejected) {
  EXPECT_THROW(Segmenter(0, 1), std::invalid_argument);
  EXPECT_THROW(Segmenter(1, 0), std::invalid_argument);
}

TEST(SegmenterTest, OverlappingSegmentsStartAtMultiplesOfHop) {
  Segmenter s(4, 2);
  const auto segs = segment_all(s, ramp(10));
  ASSERT_EQ(segs.size(), 4u);  // starts 0, 2, 4, 6; 6 + 4 = 10 covers everything
  for (size_t k = 0; k < segs.size(); ++k) {
    EXPECT_EQ(segs[k].index, k);
    EXPECT_EQ(segs[k].start_sample, int64_t(2 * k));
    EXPECT_EQ(segs[k].valid_samples, 4);
    EXPECT_EQ(segs[k].samples, ramp(4, float(2 * k)));
  }
  EXPECT_EQ(s.segments_emitted(), 4u);
  EXPECT_EQ(s.samples_pushed(), 10);
}

TEST(SegmenterTest, UncoveredTailIsZeroPaddedAndCountsOnlyRealSamples) {
  Segmenter s(4, 4);
  const auto segs = segment_all(s, ramp(10));
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_EQ(segs[2].index, 2u);
  EXPECT_EQ(segs[2].start_sample, 8);
  EXPECT_EQ(segs[2].valid_samples, 2);
  EXPECT_EQ(segs[2].samples, (std::vector<float>{8, 9, 0, 0}));
}

TEST(SegmenterTest, OverlappingTailIsPaddedWhenTheLastSegmentMissesSamples) {
  Segmenter s(4, 2);
  const auto segs = segment_all(s, ramp(11));
  ASSERT_EQ(segs.size(), 5u);  // 0, 2, 4, 6 full; sample 10 needs the tail at 8
  EXPECT_EQ(segs[4].start_sample, 8);
  EXPECT_EQ(segs[4].valid_samples, 3);
  EXPECT_EQ(segs[4].samples, (std::vector<float>{8, 9, 10, 0}));
}

TEST(SegmenterTest, HopLongerThanLengthSkipsTheGapsBetweenSegments) {
  Segmenter s(2, 3);
  const auto segs = segment_all(s, ramp(10));
  ASSERT_EQ(segs.size(), 4u);
  EXPECT_EQ(segs[0].samples, (std::vector<float>{0, 1}));
  EXPECT_EQ(segs[1].samples, (std::vector<float>{3, 4}));
  EXPECT_EQ(segs[2].samples, (std::vector<float>{6, 7}));
  EXPECT_EQ(segs[3].start_sample, 9);
  EXPECT_EQ(segs[3].samples, (std::vector<float>{9, 0}));
}

TEST(SegmenterTest, SamplesOnlyInAGapMakeNoTail) {
  Segmenter s(2, 5);
  const auto segs = segment_all(s, ramp(4));  // sample 2, 3 lie in the gap before 5
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_EQ(segs[0].start_sample, 0);
}

TEST(SegmenterTest, StreamShorterThanOneSegmentYieldsOnePaddedSegment) {
  Segmenter s(8, 4);
  const auto segs = segment_all(s, ramp(3, 1));
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_EQ(segs[0].index, 0u);
  EXPECT_EQ(segs[0].start_sample, 0);
  EXPECT_EQ(segs[0].valid_samples, 3);
  EXPECT_EQ(segs[0].samples, (std::vector<float>{1, 2, 3, 0, 0, 0, 0, 0}));
}

TEST(SegmenterTest, EmptyStreamYieldsNothingWhileOneSampleYieldsASegment) {
  Segmenter empty(8, 4);
  Segment seg;
  empty.push(nullptr, 0);
  EXPECT_FALSE(empty.next(seg));
  EXPECT_FALSE(empty.finish(seg));
  EXPECT_EQ(empty.segments_emitted(), 0u);

  Segmenter one(8, 4);
  const float sample = 0.5f;
  one.push(&sample, 1);
  EXPECT_FALSE(one.next(seg));
  ASSERT_TRUE(one.finish(seg));
  EXPECT_EQ(seg.valid_samples, 1);
  EXPECT_FALSE(one.finish(seg));
}

TEST(SegmenterTest, FinishAlsoHandsOutCompleteSegmentsNextDidNotTake) {
  Segmenter s(4, 4);
  const std::vector<float> samples = ramp(9);
  s.push(samples.data(), samples.size());
  Segment seg;
  std::vector<int64_t> starts;
  while (s.finish(seg)) starts.push_back(seg.start_sample);
  EXPECT_EQ(starts, (std::vector<int64_t>{0, 4, 8}));
}

TEST(SegmenterTest, BlockSizesDoNotChangeTheSegments) {
  const std::vector<float> samples = ramp(1000);
  Segmenter whole(64, 24);
  const auto expected = segment_all(whole, samples);

  Segmenter pieces(64, 24);
  std::vector<Segment> got;
  Segment seg;
  size_t pos = 0;
  for (size_t step = 1; pos < samples.size(); step = step * 3 % 97 + 1) {
    const size_t n = std::min(step, samples.size() - pos);
    pieces.push(samples.data() + pos, n);
    pos += n;
    while (pieces.next(seg)) got.push_back(seg);
  }
  while (pieces.finish(seg)) got.push_back(seg);

  ASSERT_EQ(got.size(), expected.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].start_sample, expected[k].start_sample);
    EXPECT_EQ(got[k].valid_samples, expected[k].valid_samples);
    EXPECT_EQ(got[k].samples, expected[k].samples) << "segment " << k;
  }
}

// Hours of pushes: what is held never exceeds one segment, one hop and the
// block just pushed, for both overlap and gaps.
TEST(SegmenterTest, BufferStaysBoundedWhileStreaming) {
  for (const auto& [length, hop] : {std::pair<size_t, size_t>{400, 160}, {100, 250}}) {
    Segmenter s(length, hop);
    const std::vector<float> block = ramp(1000);
    Segment seg;
    for (int i = 0; i < 5000; ++i) {
      const size_t n = 1 + size_t(i * 37) % block.size();
      s.push(block.data(), n);
      while (s.next(seg)) {
      }
      ASSERT_LT(s.buffered_samples(), length + hop + n) << "after push " << i;
    }
    EXPECT_GT(s.segments_emitted(), 1000u);
  }
}

// Eleven samples, 4 every 2: starts 0, 2, 4, 6 whole, then the tail from 8
// (samples 9, 10, 11 and one zero), written out by hand.
TEST(SegmenterTest, CutSegmentsCutsABufferAsAStreamIsCut) {
  std::vector<float> x(11);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i + 1);
  const std::vector<std::vector<float>> want = {{1, 2, 3, 4}, {3, 4, 5, 6}, {5, 6, 7, 8}, {7, 8, 9, 10}, {9, 10, 11, 0}};
  EXPECT_EQ(cut_segments(x.data(), x.size(), 4, 2), want);
  EXPECT_TRUE(cut_segments(x.data(), 0, 4, 2).empty());
}

}  // namespace
}  // namespace corepool
