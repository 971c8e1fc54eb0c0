// Unit tests for supervisor/batch/parallel_each.h: every index runs exactly
// once, on as many threads as asked (two calls that each wait for the other
// finish only if they run at once), on the caller alone when asked for one.
#include "supervisor/batch/parallel_each.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace corepool {
namespace {

using namespace std::chrono_literals;

TEST(ParallelEachTest, EveryIndexRunsExactlyOnce) {
  for (const int threads : {1, 2, 3, 8}) {
    std::vector<std::atomic<int>> runs(1000);
    parallel_each(runs.size(), threads, [&](size_t i) { ++runs[i]; });
    for (size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i], 1) << "index " << i << ", " << threads << " threads";
  }
  int calls = 0;
  parallel_each(0, 4, [&](size_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

// Each call waits (10 s at most) until the other has started: on one thread
// the first would give up and the test fail.
TEST(ParallelEachTest, TwoThreadsRunTwoIndicesAtOnce) {
  std::atomic<int> started{0};
  std::atomic<int> saw_both{0};
  parallel_each(2, 2, [&](size_t) {
    ++started;
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (started < 2 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    if (started == 2) ++saw_both;
  });
  EXPECT_EQ(saw_both, 2);
}

TEST(ParallelEachTest, OneThreadRunsOnTheCallerInOrder) {
  const auto caller = std::this_thread::get_id();
  std::vector<size_t> order;
  bool elsewhere = false;
  parallel_each(5, 1, [&](size_t i) {
    order.push_back(i);
    if (std::this_thread::get_id() != caller) elsewhere = true;
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(elsewhere);
}

}  // namespace
}  // namespace corepool
