// --min-score and --merge-gap on fixed events: which survive, what merges,
// the merged event's span and score (the higher one), and the order they leave in.
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "supervisor/batch/event_filter.h"

namespace corepool {
namespace {

struct Collected {
  std::vector<Event> events;
  EventFilter::Emit emit() {
    return [this](const Event& e) { events.push_back(e); };
  }
};

void expect_event(const Event& e, double start, double end, const std::string& label, float score) {
  EXPECT_DOUBLE_EQ(e.start, start);
  EXPECT_DOUBLE_EQ(e.end, end);
  EXPECT_EQ(e.label, label);
  EXPECT_FLOAT_EQ(e.score, score);
}

TEST(EventFilterTest, WithoutOptionsEveryEventPassesAtOnce) {
  Collected out;
  EventFilter filter({}, out.emit());
  filter.add({0, 1, "a", 0.1f});
  ASSERT_EQ(out.events.size(), 1u) << "no merging: nothing is held";
  filter.add({0.5, 2, "b", 0.0f});
  filter.finish();
  EXPECT_EQ(out.events.size(), 2u);
}

TEST(EventFilterTest, MinScoreDropsEventsBelowItAndKeepsEqualOnes) {
  Collected out;
  EventFilterOptions o;
  o.min_score = 0.5;
  EventFilter filter(o, out.emit());
  filter.add({0, 1, "a", 0.49f});
  filter.add({1, 2, "b", 0.5f});
  filter.add({2, 3, "c", 0.9f});
  filter.finish();
  ASSERT_EQ(out.events.size(), 2u);
  EXPECT_EQ(out.events[0].label, "b");
  EXPECT_EQ(out.events[1].label, "c");
}

TEST(EventFilterTest, EventsOfOneLabelWithinTheGapMergeWithTheHigherScore) {
  Collected out;
  EventFilterOptions o;
  o.merge_gap = 1.0;
  EventFilter filter(o, out.emit());
  filter.add({0, 2, "bird", 0.6f});    // gap to the next bird: 3 - 2 = 1.0 <= 1.0: merges
  filter.add({1, 4, "wind", 0.7f});
  filter.add({3, 5, "bird", 0.9f});    // then 6.5 - 5 = 1.5 > 1.0: a new bird
  filter.add({4.5, 6, "wind", 0.2f});  // 4.5 - 4 = 0.5: merges with the first wind
  filter.add({6.5, 7, "bird", 0.3f});
  EXPECT_TRUE(out.events.empty()) << "merging holds events until the file ends";
  filter.finish();
  ASSERT_EQ(out.events.size(), 3u);
  expect_event(out.events[0], 0, 5, "bird", 0.9f);
  expect_event(out.events[1], 1, 6, "wind", 0.7f);
  expect_event(out.events[2], 6.5, 7, "bird", 0.3f);
}

TEST(EventFilterTest, OverlappingEventsOfOneLabelMergeEvenWithGapZero) {
  Collected out;
  EventFilterOptions o;
  o.merge_gap = 0;
  EventFilter filter(o, out.emit());
  filter.add({0, 8.5, "speech", 1.0f});
  filter.add({8.0, 9.0, "speech", 0.5f});  // starts before the previous end
  filter.add({9.5, 10.0, "speech", 0.5f});  // 0.5 s apart: stays
  filter.finish();
  ASSERT_EQ(out.events.size(), 2u);
  expect_event(out.events[0], 0, 9.0, "speech", 1.0f);
  expect_event(out.events[1], 9.5, 10.0, "speech", 0.5f);
}

TEST(EventFilterTest, MinScoreIsAppliedBeforeMerging) {
  Collected out;
  EventFilterOptions o;
  o.min_score = 0.5;
  o.merge_gap = 5;
  EventFilter filter(o, out.emit());
  filter.add({0, 1, "a", 0.9f});
  filter.add({2, 3, "a", 0.1f});  // dropped: does not stretch the first
  filter.finish();
  ASSERT_EQ(out.events.size(), 1u);
  expect_event(out.events[0], 0, 1, "a", 0.9f);
}

}  // namespace
}  // namespace corepool
