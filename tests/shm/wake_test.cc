// Tests for shm/wake.h: futex wait/wake results, a wake crossing a process
// boundary (the futex word in a Segment, the waiter in a forked child), and
// eventfd signal/drain. Children run under deadlines; no /dev/shm residue.
#include "shm/wake.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <new>

#include "shm/segment.h"
#include "tests/shm/test_support.h"

namespace corepool::shm {
namespace {

using testing::after;
using testing::ExitStatus;
using testing::ChildProcess;
using testing::Clock;
using namespace std::chrono_literals;

bool readable(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN) != 0;
}

TEST(FutexTest, WaitReturnsEagainWhenTheWordNoLongerHoldsTheExpectedValue) {
  std::atomic<uint32_t> word{1};
  EXPECT_EQ(futex_wait(&word, 0, after(10s)), -EAGAIN);
}

TEST(FutexTest, WaitReturnsEtimedoutAtItsDeadline) {
  std::atomic<uint32_t> word{0};
  const auto deadline = after(50ms);
  EXPECT_EQ(futex_wait(&word, 0, deadline), -ETIMEDOUT);
  EXPECT_GE(Clock::now(), deadline);
}

TEST(FutexTest, WaitWithAPastDeadlineReturnsAtOnce) {
  std::atomic<uint32_t> word{0};
  EXPECT_EQ(futex_wait(&word, 0, Clock::now() - 1s), -ETIMEDOUT);
  EXPECT_EQ(futex_wait(&word, 0, Clock::time_point{}), -ETIMEDOUT);
}

TEST(FutexTest, WakeWithoutWaitersWakesNobody) {
  std::atomic<uint32_t> word{0};
  EXPECT_EQ(futex_wake(&word, 1), 0);
}

// The child must really be asleep in FUTEX_WAIT before the wake, or the test
// would only exercise the EAGAIN path. Its own deadline (60 s) is far beyond
// ours (10 s): only a shared-futex wake gets it out in time.
TEST(FutexTest, WakeReachesAWaiterInAnotherProcess) {
  {
    Segment segment = Segment::create(sizeof(std::atomic<uint32_t>), "wake-test");
    auto* word = new (segment.data()) std::atomic<uint32_t>(0);
    ChildProcess child = ChildProcess::fork([&] {
      const auto deadline = after(60s);
      while (word->load() == 0) {
        const int rc = futex_wait(word, 0, deadline);
        if (rc != 0 && rc != -EAGAIN) return 20;
      }
      return 0;
    });
    ASSERT_TRUE(testing::wait_until([&] { return testing::blocked_in_futex(child.pid()); },
                                    after(10s)))
        << "child never went to sleep in futex()";
    word->store(1);
    EXPECT_EQ(futex_wake(word, 1), 1) << "exactly the child was asleep";
    const ExitStatus exit = child.wait(after(10s));
    EXPECT_EQ(exit.code, 0) << exit.describe();
  }
  EXPECT_TRUE(testing::shm_names_of(getpid()).empty());
}

TEST(EventfdTest, ASignalledEventfdIsReadableUntilDrained) {
  const int fd = make_eventfd();
  ASSERT_GE(fd, 0) << "make_eventfd: " << -fd;
  EXPECT_FALSE(readable(fd));
  EXPECT_EQ(drain_eventfd(fd), 0) << "draining an unsignalled eventfd does not block";
  for (int i = 0; i < 3; ++i) ASSERT_EQ(signal_eventfd(fd), 0);
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(drain_eventfd(fd), 3);
  EXPECT_FALSE(readable(fd));
  EXPECT_EQ(drain_eventfd(fd), 0);
  close(fd);
}

TEST(EventfdTest, WrappersReturnMinusErrnoOnABadDescriptor) {
  EXPECT_EQ(signal_eventfd(-1), -EBADF);
  EXPECT_EQ(drain_eventfd(-1), -EBADF);
}

}  // namespace
}  // namespace corepool::shm
