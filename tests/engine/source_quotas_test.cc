// How a label's budget of real segments is shared among its sources
// (models/train/real_clips.h): against quotas worked by hand, the square-root
// rule computed here, and what must hold for any sizes (never more than a
// source has; the whole budget used when there is enough).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "models/train/real_clips.h"

namespace corepool::train {
namespace {

size_t sum(const std::vector<size_t>& v) { return std::accumulate(v.begin(), v.end(), size_t{0}); }

TEST(SourceQuotasTest, UsesTheWholeBudgetWhenTheSourcesHaveIt) {
  // Square roots 100, 10 and 2.24: shares of 5,000 would be 4,455, 446 and
  // 100, but the two small sources have only 100 and 5; what they leave
  // goes to the big one (before, it was lost: 4,560 in all).
  const std::vector<size_t> q = source_quotas({10000, 100, 5}, 5000);
  EXPECT_EQ(q, (std::vector<size_t>{4895, 100, 5}));
}

TEST(SourceQuotasTest, GivesEverythingWhenTheBudgetIsMoreThanThereIs) {
  const std::vector<size_t> q = source_quotas({30, 7, 0, 2}, 1000);
  EXPECT_EQ(q, (std::vector<size_t>{30, 7, 0, 2}));
}

TEST(SourceQuotasTest, NothingToShare) {
  EXPECT_EQ(source_quotas({}, 100), std::vector<size_t>{});
  EXPECT_EQ(source_quotas({5, 5}, 0), (std::vector<size_t>{0, 0}));
}

// When no source runs out, the quotas follow the square roots of the sizes
// (within the rounding of one pass: a few segments).
TEST(SourceQuotasTest, FollowsTheSquareRootsWhenNoSourceRunsOut) {
  const std::vector<size_t> sizes = {40000, 10000, 2500, 900};  // roots 200, 100, 50, 30
  const std::vector<size_t> q = source_quotas(sizes, 760);
  EXPECT_EQ(sum(q), 760u);
  const double roots = 380;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_NEAR(double(q[i]), std::sqrt(double(sizes[i])) / roots * 760, 4.0) << "source " << i;
  }
}

TEST(SourceQuotasTest, NeverMoreThanASourceHasAndSumsToTheBudgetOnManyShapes) {
  uint64_t s = 7;
  auto next = [&] { return s = s * 6364136223846793005ull + 1442695040888963407ull, s >> 33; };
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<size_t> sizes(1 + next() % 30);
    for (size_t& n : sizes) n = next() % (next() % 2 ? 20 : 3000);
    const size_t budget = next() % 8000;
    const std::vector<size_t> q = source_quotas(sizes, budget);
    ASSERT_EQ(q.size(), sizes.size());
    for (size_t i = 0; i < q.size(); ++i) ASSERT_LE(q[i], sizes[i]) << "trial " << trial;
    ASSERT_EQ(sum(q), std::min(budget, sum(sizes))) << "trial " << trial;
  }
}

}  // namespace
}  // namespace corepool::train
