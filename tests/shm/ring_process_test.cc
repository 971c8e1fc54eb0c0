// Tests for shm/ring.h across processes, the way process mode uses it: rings
// placement-new'd into a Segment before fork(), a child consuming with wait()
// and echoing through a second ring, wake-ups by futex and by eventfd. Every
// child runs under a deadline and is killed when it passes; the fixture checks
// that no /dev/shm name is left behind.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <new>

#include "shm/ring.h"
#include "shm/segment.h"
#include "shm/wake.h"
#include "tests/shm/test_support.h"

namespace corepool::shm {
namespace {

using testing::after;
using testing::ExitStatus;
using testing::ChildProcess;
using testing::Clock;
using namespace std::chrono_literals;

using testing::Descriptor;

constexpr uint32_t kData = 0;
constexpr uint32_t kStop = 1;

Descriptor descriptor(uint64_t seq, uint32_t kind = kData) {
  return Descriptor{seq, seq * 64, 32, kind, ~seq};
}

constexpr uint32_t kSlots = 64;
using Ring = RingData<Descriptor, kSlots>;

// What the supervisor puts into a worker's ring segment: both directions.
struct EchoRings {
  Ring requests;  // parent → child
  Ring replies;   // child → parent
};

// Child exit codes, so a failure says which step broke.
enum ChildCode : int {
  kOk = 0,
  kWaitTimedOut = 2,
  kWokenOnlyByDeadline = 3,
  kOutOfOrder = 4,
  kRepliesStuck = 5,
  kPushFailed = 6,
  kNotSignalled = 7,
};

class RingProcessTest : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_TRUE(testing::shm_names_of(getpid()).empty()) << "a /dev/shm name outlived its test";
  }
};

// Reads requests until kStop and echoes each one; a lost wake-up shows as a
// wait that only returned at its deadline.
int echo_until_stop(EchoRings* rings, uint32_t spin_iterations) {
  RingConsumer<Descriptor, kSlots> in(&rings->requests);
  RingProducer<Descriptor, kSlots> out(&rings->replies);
  for (uint64_t i = 0;; ++i) {
    const auto deadline = after(10s);
    if (!in.wait(deadline, spin_iterations)) return kWaitTimedOut;
    if (Clock::now() >= deadline) return kWokenOnlyByDeadline;
    const Descriptor d = *in.front();
    in.pop();
    if (d.seq != i || d.check != ~i) return kOutOfOrder;
    if (d.kind == kStop) return kOk;
    while (!out.try_push(d)) {
      if (Clock::now() >= deadline) return kRepliesStuck;
      cpu_relax();
    }
    out.wake_consumer();
  }
}

class RingEchoTest : public RingProcessTest, public ::testing::WithParamInterface<uint32_t> {};

TEST_P(RingEchoTest, AChildEchoesEveryDescriptorInOrderThroughASecondRing) {
  constexpr uint64_t kCount = 200000;
  const uint32_t spin = GetParam();
  Segment segment = Segment::create(sizeof(EchoRings), "ring-test");
  auto* rings = new (segment.data()) EchoRings;  // before fork, as the supervisor does
  ChildProcess child = ChildProcess::fork([&] { return echo_until_stop(rings, spin); });

  RingProducer<Descriptor, kSlots> out(&rings->requests);
  RingConsumer<Descriptor, kSlots> in(&rings->replies);
  uint64_t sent = 0;
  uint64_t received = 0;
  while (received < kCount) {
    // Keep the request ring full; take a reply whenever we cannot push.
    if (sent < kCount && out.try_push(descriptor(sent))) {
      ++sent;
      out.wake_consumer();
      continue;
    }
    const auto deadline = after(10s);
    if (!in.wait(deadline, spin) || Clock::now() >= deadline) break;
    const Descriptor d = *in.front();
    if (d.seq != received || d.check != ~received || d.offset != received * 64) break;
    in.pop();
    ++received;
  }
  EXPECT_EQ(received, kCount) << "reply missing, late or out of order";
  ASSERT_TRUE(out.try_push(descriptor(sent, kStop))) << "the request ring is drained: the stop must fit";
  out.wake_consumer();
  const ExitStatus exit = child.wait(after(20s));
  EXPECT_EQ(exit.code, kOk) << exit.describe();
  EXPECT_EQ(in.front(), nullptr) << "no reply beyond the ones sent";
}

INSTANTIATE_TEST_SUITE_P(SpinningThenSleepingAndAlwaysSleeping, RingEchoTest,
                         ::testing::Values(2000u, 0u),
                         [](const ::testing::TestParamInfo<uint32_t>& info) {
                           return info.param == 0 ? std::string("AlwaysSleeping")
                                                  : std::string("SpinningFirst");
                         });

// The child's own CPU time from wait4(): a wait that spins would use about
// 100% of its 200 ms.
TEST_F(RingProcessTest, AChildWaitingOnAnEmptyRingSleepsAndReturnsFalseAtItsDeadline) {
  Segment segment = Segment::create(sizeof(Ring), "ring-test");
  auto* ring = new (segment.data()) Ring;
  ChildProcess child = ChildProcess::fork([&] {
    RingConsumer<Descriptor, kSlots> in(ring);
    const auto deadline = after(200ms);
    if (in.wait(deadline)) return 10;
    return Clock::now() >= deadline ? kOk : 11;
  });
  const auto start = Clock::now();
  const ExitStatus exit = child.wait(after(10s));
  const auto wall = Clock::now() - start;
  ASSERT_EQ(exit.code, kOk) << exit.describe();
  EXPECT_LT(testing::cpu_time_of(exit.usage).count(), wall.count() / 5)
      << "a waiting consumer must sleep, not spin";
}

// The supervisor's completion rings: consumer_sleeping stays 1, the worker
// signals an eventfd after pushing, the supervisor polls the eventfd.
TEST_F(RingProcessTest, ACompletionPushedByAChildWakesTheParentsEventfd) {
  Segment segment = Segment::create(sizeof(Ring), "ring-test");
  auto* ring = new (segment.data()) Ring;
  ring->consumer_sleeping.store(1);  // eventfd consumer: always wants a wake-up
  const int efd = make_eventfd();
  ASSERT_GE(efd, 0) << "make_eventfd: " << -efd;
  ChildProcess child = ChildProcess::fork([&] {
    RingProducer<Descriptor, kSlots> out(ring);
    for (uint64_t i = 0; i < 3; ++i) {
      if (!out.try_push(descriptor(i))) return kPushFailed;
      if (!out.consumer_wants_wake()) return kNotSignalled;
      if (signal_eventfd(efd) != 0) return kNotSignalled;
    }
    return kOk;
  });
  pollfd pfd{efd, POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 10000), 1) << "eventfd never became readable";
  const ExitStatus exit = child.wait(after(10s));
  ASSERT_EQ(exit.code, kOk) << exit.describe();
  EXPECT_EQ(drain_eventfd(efd), 3);
  RingConsumer<Descriptor, kSlots> in(ring);
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_NE(in.front(), nullptr);
    EXPECT_EQ(in.front()->seq, i);
    in.pop();
  }
  EXPECT_EQ(in.front(), nullptr);
  close(efd);
}

}  // namespace
}  // namespace corepool::shm
