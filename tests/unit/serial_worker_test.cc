// Unit tests for supervisor/batch/serial_worker.h: tasks run one at a time, in
// the order posted, on a thread that is not the poster's; drain() waits for
// all of them and hands back the first exception; the destructor runs what is
// still queued.
#include "supervisor/batch/serial_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

namespace corepool {
namespace {

using namespace std::chrono_literals;

TEST(SerialWorkerTest, TasksRunInPostedOrderOneAtATimeOffTheCallersThread) {
  SerialWorker worker;
  std::vector<int> order;  // written by the worker's thread only, read after drain()
  std::atomic<int> running{0};
  std::atomic<int> most_at_once{0};
  std::atomic<bool> on_caller{false};
  const auto caller = std::this_thread::get_id();
  for (int i = 0; i < 50; ++i) {
    worker.post([&, i] {
      const int now = ++running;
      if (now > most_at_once) most_at_once = now;
      if (std::this_thread::get_id() == caller) on_caller = true;
      if (i % 10 == 0) std::this_thread::sleep_for(1ms);  // give a second runner, if any, time to overlap
      order.push_back(i);
      --running;
    });
  }
  worker.drain();
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(most_at_once, 1);
  EXPECT_FALSE(on_caller);
}

// queued() counts the tasks not yet started: two behind a running one, and
// none, seen from the last task itself (the drivers sync their directories then).
TEST(SerialWorkerTest, QueuedCountsTheTasksNotYetStarted) {
  SerialWorker worker;
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<size_t> seen_by_last{99};
  worker.post([&started, released] {
    started.set_value();
    released.wait();
  });
  worker.post([] {});
  worker.post([&] { seen_by_last = worker.queued(); });
  started.get_future().wait();
  EXPECT_EQ(worker.queued(), 2u);
  release.set_value();
  worker.drain();
  EXPECT_EQ(worker.queued(), 0u);
  EXPECT_EQ(seen_by_last, 0u);
}

TEST(SerialWorkerTest, DrainWaitsForEveryTaskPostedBeforeIt) {
  SerialWorker worker;
  std::atomic<int> done{0};
  for (int i = 0; i < 5; ++i) {
    worker.post([&] {
      std::this_thread::sleep_for(20ms);
      ++done;
    });
  }
  worker.drain();  // returning early would leave `done` below 5: the tasks need 100 ms
  EXPECT_EQ(done, 5);
  worker.drain();  // nothing queued: returns at once
}

TEST(SerialWorkerTest, AThrowingTaskIsRethrownByDrainAndTheRestStillRun) {
  SerialWorker worker;
  std::atomic<int> after{0};
  worker.post([] { throw std::runtime_error("commit failed"); });
  worker.post([] { throw std::runtime_error("second failure"); });
  worker.post([&] { ++after; });
  try {
    worker.drain();
    FAIL() << "drain() did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "commit failed");
  }
  EXPECT_EQ(after, 1);
  EXPECT_NO_THROW(worker.drain());  // handed back once
}

TEST(SerialWorkerTest, TheDestructorRunsWhatIsStillQueued) {
  std::atomic<int> done{0};
  {
    SerialWorker worker;
    for (int i = 0; i < 3; ++i) {
      worker.post([&] {
        std::this_thread::sleep_for(10ms);
        ++done;
      });
    }
  }
  EXPECT_EQ(done, 3);
}

}  // namespace
}  // namespace corepool
