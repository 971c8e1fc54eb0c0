// Unit tests for supervisor/batch/parallel_each.h: every index runs exactly
// once, on as many threads as asked (two calls that each wait for the other
// finish only if they run at once), on the caller alone when asked for one;
// helpers are kept from one call to the next, and a call whose helpers are
// all busy elsewhere finishes on its own thread.
#include "supervisor/batch/parallel_each.h"

#include <gtest/gtest.h>

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>
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

// The kernel's ids of the threads, other than the caller, that ran a call of
// two indices that each wait for the other (so a helper runs one).
std::set<pid_t> helpers_of_a_call() {
  std::atomic<int> started{0};
  std::mutex mu;
  std::set<pid_t> helpers;
  const pid_t caller = ::gettid();
  parallel_each(2, 2, [&](size_t) {
    ++started;
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (started < 2 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    std::lock_guard<std::mutex> lock(mu);
    if (::gettid() != caller) helpers.insert(::gettid());
  });
  return helpers;
}

std::set<pid_t> threads_of_this_process() {
  std::set<pid_t> tids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    tids.insert(static_cast<pid_t>(std::stol(entry.path().filename().string())));
  }
  return tids;
}

// A new thread gets a new kernel id: helpers started for each call would not
// be among the threads that were there before the calls.
TEST(ParallelEachTest, HelpersAreKeptFromOneCallToTheNext) {
  ASSERT_EQ(helpers_of_a_call().size(), 1u);
  const std::set<pid_t> before = threads_of_this_process();
  for (int k = 0; k < 10; ++k) {
    for (const pid_t helper : helpers_of_a_call()) {
      EXPECT_EQ(before.count(helper), 1u) << "call " << k << ": helper " << helper << " is a new thread";
    }
  }
}

// Every helper is held by one call; a second call from another thread then
// runs all of its indices on its own thread and returns, while the first
// still holds them.
TEST(ParallelEachTest, ACallWhoseHelpersAreAllBusyFinishesAlone) {
  std::mutex mu;
  std::condition_variable changed;
  size_t holding = 0;
  bool release = false;
  const auto let_go = [&] {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
    changed.notify_all();
  };
  auto blocker = std::async(std::launch::async, [&] {
    parallel_each(kParallelEachHelpers + 1, static_cast<int>(kParallelEachHelpers + 1), [&](size_t) {
      std::unique_lock<std::mutex> lock(mu);
      ++holding;
      changed.notify_all();
      changed.wait_for(lock, 20s, [&] { return release; });
    });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!changed.wait_for(lock, 10s, [&] { return holding == kParallelEachHelpers + 1; })) {
      lock.unlock();
      let_go();
      FAIL() << "the helpers did not all start";
    }
  }
  // Its first index waits up to 0.5 s for another thread to take one: a
  // helper started for the call would (as threads made per call did).
  std::vector<int> runs(100, 0);
  std::atomic<bool> elsewhere{false};
  auto second = std::async(std::launch::async, [&] {
    const auto second_caller = std::this_thread::get_id();
    parallel_each(runs.size(), 4, [&](size_t i) {
      ++runs[i];
      if (std::this_thread::get_id() != second_caller) elsewhere = true;
      const auto give_up = std::chrono::steady_clock::now() + 500ms;
      while (i == 0 && !elsewhere && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    });
  });
  const bool finished = second.wait_for(10s) == std::future_status::ready;
  let_go();
  blocker.get();
  ASSERT_TRUE(finished) << "the second call waited for a helper to be free";
  second.get();
  EXPECT_EQ(runs, std::vector<int>(100, 1));
  EXPECT_FALSE(elsewhere);
}

// Calls from several threads at once, each asking for helpers: every index
// of every call runs exactly once.
TEST(ParallelEachTest, CallsFromSeveralThreadsAtOnceEachRunEveryIndexOnce) {
  constexpr int kCallers = 4, kCalls = 50;
  std::vector<std::future<bool>> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.push_back(std::async(std::launch::async, [] {
      for (int k = 0; k < kCalls; ++k) {
        std::vector<std::atomic<int>> runs(64);
        parallel_each(runs.size(), 3, [&](size_t i) { ++runs[i]; });
        for (const auto& r : runs) {
          if (r != 1) return false;
        }
      }
      return true;
    }));
  }
  for (auto& c : callers) EXPECT_TRUE(c.get());
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
