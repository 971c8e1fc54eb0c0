// plan_lanes() (supervisor/batch/stream_lanes.cc): kept ranges tile the file,
// warm-ups start early but never before the file, lanes off is one lane.
#include "supervisor/batch/stream_lanes.h"

#include <gtest/gtest.h>

namespace corepool {
namespace {

bool operator==(const Lane& a, const Lane& b) { return a.first == b.first && a.keep == b.keep && a.end == b.end; }

TEST(PlanLanes, LongFileIsCutIntoWarmedUpLanes) {
  // 10 chunks, lanes of 4, warm-up 1: keep [0,4) [4,8) [8,10), each after the first from one chunk early.
  const std::vector<Lane> lanes = plan_lanes(10, 4, 1);
  ASSERT_EQ(lanes.size(), 3u);
  EXPECT_TRUE(lanes[0] == (Lane{0, 0, 4}));
  EXPECT_TRUE(lanes[1] == (Lane{3, 4, 8}));
  EXPECT_TRUE(lanes[2] == (Lane{7, 8, 10}));
}

TEST(PlanLanes, WarmUpLongerThanTheStartIsClipped) {
  const std::vector<Lane> lanes = plan_lanes(6, 2, 5);
  ASSERT_EQ(lanes.size(), 3u);
  EXPECT_TRUE(lanes[1] == (Lane{0, 2, 4}));
  EXPECT_TRUE(lanes[2] == (Lane{0, 4, 6}));
}

TEST(PlanLanes, LanesOffOrAShortFileIsOneExactLane) {
  ASSERT_EQ(plan_lanes(10, 0, 3).size(), 1u);
  EXPECT_TRUE(plan_lanes(10, 0, 3)[0] == (Lane{0, 0, 10}));
  EXPECT_TRUE(plan_lanes(10, 10, 3)[0] == (Lane{0, 0, 10}));
  EXPECT_TRUE(plan_lanes(0, 4, 1).empty());
}

}  // namespace
}  // namespace corepool
