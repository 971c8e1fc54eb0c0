// Tests for shm/ring.h between threads of one process: FIFO semantics, full
// and empty, wraparound, ten million sequence numbers across two threads, and
// wait()'s sleep / wake-up / deadline. These are the ThreadSanitizer target
// (corepool_shm_tests_tsan); ring_process_test.cc covers processes. Each ring
// is heap-allocated here: the layout is the one a Segment would hold.
#include "shm/ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <thread>

#include "tests/shm/test_support.h"

#ifndef COREPOOL_RING_TEST_SEQUENCE
#define COREPOOL_RING_TEST_SEQUENCE 10000000
#endif

namespace corepool::shm {
namespace {

using testing::after;
using testing::Clock;
using namespace std::chrono_literals;

using testing::Descriptor;

Descriptor descriptor(uint64_t seq) { return Descriptor{seq, seq * 64, 32, 7, ~seq}; }

template <typename T, uint32_t N>
std::unique_ptr<RingData<T, N>> make_ring() {
  return std::make_unique<RingData<T, N>>();
}

TEST(RingTest, IndicesAndSlotsLiveOnSeparateCacheLines) {
  using Data = RingData<Descriptor, 8>;
  EXPECT_GE(offsetof(Data, tail) - offsetof(Data, head), kCacheLine);
  EXPECT_GE(offsetof(Data, consumer_sleeping) - offsetof(Data, tail), kCacheLine);
  EXPECT_GE(offsetof(Data, slots) - offsetof(Data, consumer_sleeping), kCacheLine);
  EXPECT_EQ(offsetof(Data, slots) % kCacheLine, 0u);
}

TEST(RingTest, FrontOfAnEmptyRingIsNull) {
  auto ring = make_ring<Descriptor, 8>();
  RingConsumer<Descriptor, 8> consumer(ring.get());
  EXPECT_EQ(consumer.front(), nullptr);
  EXPECT_EQ(consumer.size_approx(), 0u);
}

TEST(RingTest, TailMoreThanNAheadIsCorruptAndReadsAsEmpty) {
  auto ring = make_ring<Descriptor, 8>();
  RingConsumer<Descriptor, 8> consumer(ring.get());
  // What a corrupted producer could leave: a tail far beyond head + N.
  ring->tail.store(~uint64_t{0} - 3);
  EXPECT_EQ(consumer.front(), nullptr);
  EXPECT_TRUE(consumer.corrupt());
  EXPECT_EQ(ring->head.load(), 0u) << "nothing was consumed";
}

TEST(RingTest, FullRingIsNotCorrupt) {
  auto ring = make_ring<Descriptor, 8>();
  RingProducer<Descriptor, 8> producer(ring.get());
  RingConsumer<Descriptor, 8> consumer(ring.get());
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(producer.try_push(descriptor(i)));
  ASSERT_NE(consumer.front(), nullptr);
  EXPECT_FALSE(consumer.corrupt());
}

TEST(RingTest, PushedDescriptorsArePoppedInOrder) {
  auto ring = make_ring<Descriptor, 8>();
  RingProducer<Descriptor, 8> producer(ring.get());
  RingConsumer<Descriptor, 8> consumer(ring.get());
  for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(producer.try_push(descriptor(i)));
  EXPECT_EQ(producer.size_approx(), 5u);
  EXPECT_EQ(consumer.size_approx(), 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    const Descriptor* d = consumer.front();
    ASSERT_NE(d, nullptr) << "descriptor " << i;
    EXPECT_EQ(d->seq, i);
    EXPECT_EQ(d->offset, i * 64);
    EXPECT_EQ(d->check, ~i);
    consumer.pop();
  }
  EXPECT_EQ(consumer.front(), nullptr);
}

TEST(RingTest, PushFailsWhenNDescriptorsAreQueuedAndSucceedsAfterAPop) {
  auto ring = make_ring<uint64_t, 4>();
  RingProducer<uint64_t, 4> producer(ring.get());
  RingConsumer<uint64_t, 4> consumer(ring.get());
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(producer.try_push(i));
  EXPECT_FALSE(producer.try_push(99));
  EXPECT_EQ(producer.size_approx(), 4u);
  ASSERT_NE(consumer.front(), nullptr);
  EXPECT_EQ(*consumer.front(), 0u);
  consumer.pop();
  EXPECT_TRUE(producer.try_push(4));
  EXPECT_FALSE(producer.try_push(5));
  for (uint64_t i = 1; i <= 4; ++i) {
    ASSERT_NE(consumer.front(), nullptr);
    EXPECT_EQ(*consumer.front(), i);
    consumer.pop();
  }
  EXPECT_EQ(consumer.front(), nullptr);
}

TEST(RingTest, IndicesWrapAroundOverManyLaps) {
  auto ring = make_ring<uint64_t, 8>();
  RingProducer<uint64_t, 8> producer(ring.get());
  RingConsumer<uint64_t, 8> consumer(ring.get());
  uint64_t next_push = 0;
  uint64_t next_pop = 0;
  // Batches of 1..8 keep head and tail at every offset from each other and
  // from the slot array's end.
  for (int round = 0; round < 5000; ++round) {
    const int batch = 1 + round % 8;
    for (int i = 0; i < batch; ++i) ASSERT_TRUE(producer.try_push(next_push++));
    ASSERT_EQ(consumer.size_approx(), static_cast<uint32_t>(batch));
    for (int i = 0; i < batch; ++i) {
      const uint64_t* v = consumer.front();
      ASSERT_NE(v, nullptr);
      ASSERT_EQ(*v, next_pop++);
      consumer.pop();
    }
  }
  EXPECT_GT(next_pop, 8u * 1000u);  // well over a thousand laps
  EXPECT_EQ(ring->head.load(), next_pop);
  EXPECT_EQ(ring->tail.load(), next_push);
}

TEST(RingTest, TwoThreadsPassTenMillionSequenceNumbersInOrder) {
  constexpr uint64_t kCount = COREPOOL_RING_TEST_SEQUENCE;
  auto ring = make_ring<uint64_t, 1024>();
  const auto deadline = after(120s);
  std::atomic<bool> give_up{false};
  std::thread producer_thread([&] {
    RingProducer<uint64_t, 1024> producer(ring.get());
    for (uint64_t i = 0; i < kCount && !give_up.load(std::memory_order_relaxed); ++i) {
      while (!producer.try_push(i) && !give_up.load(std::memory_order_relaxed)) cpu_relax();
    }
  });
  RingConsumer<uint64_t, 1024> consumer(ring.get());
  uint64_t expected = 0;
  uint64_t polls = 0;
  while (expected < kCount) {
    const uint64_t* v = consumer.front();
    if (v == nullptr) {
      if (++polls % 4096 == 0 && Clock::now() > deadline) break;
      cpu_relax();
      continue;
    }
    if (*v != expected) break;
    consumer.pop();
    ++expected;
  }
  give_up = true;
  producer_thread.join();
  EXPECT_EQ(expected, kCount) << "sequence broken or stalled at " << expected;
  EXPECT_EQ(consumer.front(), nullptr);
}

TEST(RingTest, WaitReturnsAtOnceWhenTheRingIsNotEmpty) {
  auto ring = make_ring<uint64_t, 8>();
  RingProducer<uint64_t, 8> producer(ring.get());
  RingConsumer<uint64_t, 8> consumer(ring.get());
  ASSERT_TRUE(producer.try_push(42));
  EXPECT_TRUE(consumer.wait(Clock::now(), 0));
  ASSERT_NE(consumer.front(), nullptr);
  EXPECT_EQ(*consumer.front(), 42u);
  EXPECT_EQ(ring->consumer_sleeping.load(), 0u);
}

// The waiting thread measures its own CPU time: a wait that spins instead of
// sleeping would use about 100% of the 200 ms.
TEST(RingTest, WaitOnAnEmptyRingSleepsUntilItsDeadlineAndReturnsFalse) {
  auto ring = make_ring<uint64_t, 8>();
  RingConsumer<uint64_t, 8> consumer(ring.get());
  const auto cpu_before = testing::thread_cpu_time();
  const auto start = Clock::now();
  const auto deadline = start + 200ms;
  const bool woke = consumer.wait(deadline);
  const auto wall = Clock::now() - start;
  const auto cpu = testing::thread_cpu_time() - cpu_before;
  EXPECT_FALSE(woke);
  EXPECT_GE(Clock::now(), deadline);
  EXPECT_LT(cpu.count(), wall.count() / 5) << "a waiting consumer must sleep, not spin";
  EXPECT_EQ(ring->consumer_sleeping.load(), 0u) << "a timed-out consumer no longer wants wakes";
}

// A worker asked to stop: the supervisor sets the stop word, then forces a
// wake. The sleeping consumer returns false then, not at its deadline (it
// used to re-check only the ring and sleep on: every process pool's shutdown
// waited out its workers' 100 ms wait).
TEST(RingTest, AConsumerWokenWithItsStopWordSetReturnsFalseBeforeItsDeadline) {
  auto ring = make_ring<uint64_t, 8>();
  RingProducer<uint64_t, 8> producer(ring.get());
  RingConsumer<uint64_t, 8> consumer(ring.get());
  std::atomic<uint32_t> stop{0};
  std::thread stopper([&] {
    while (ring->consumer_sleeping.load() == 0) std::this_thread::yield();  // it sleeps: then stop it
    stop.store(1, std::memory_order_release);
    producer.force_wake_consumer();
  });
  const auto deadline = Clock::now() + 30s;
  const bool woke = consumer.wait(deadline, 0, &stop);
  stopper.join();
  EXPECT_FALSE(woke);
  EXPECT_LT(Clock::now(), deadline) << "the consumer slept on to its deadline";
  EXPECT_EQ(ring->consumer_sleeping.load(), 0u);
}

// A stop word already set returns at once, and a ring with work still wins.
TEST(RingTest, WaitWithItsStopWordSetReturnsAtOnceUnlessTheRingHasWork) {
  auto ring = make_ring<uint64_t, 8>();
  RingProducer<uint64_t, 8> producer(ring.get());
  RingConsumer<uint64_t, 8> consumer(ring.get());
  const std::atomic<uint32_t> stop{1};
  const auto deadline = Clock::now() + 30s;
  EXPECT_FALSE(consumer.wait(deadline, 0, &stop));
  EXPECT_LT(Clock::now(), deadline);
  ASSERT_TRUE(producer.try_push(7));
  EXPECT_TRUE(consumer.wait(deadline, 0, &stop));
}

// Staged descriptors stay invisible to the consumer until publish(), which
// shows them all at once; a full ring refuses a stage as it refuses a push.
TEST(RingTest, StagedDescriptorsAppearTogetherAtPublish) {
  auto ring = make_ring<uint64_t, 4>();
  RingProducer<uint64_t, 4> producer(ring.get());
  RingConsumer<uint64_t, 4> consumer(ring.get());
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(producer.try_stage(10 + i));
  EXPECT_FALSE(producer.try_stage(99)) << "four staged fill a ring of four";
  EXPECT_EQ(consumer.front(), nullptr) << "a staged descriptor was visible before publish()";
  EXPECT_EQ(consumer.size_approx(), 0u);
  producer.publish();
  EXPECT_EQ(consumer.size_approx(), 4u);
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_NE(consumer.front(), nullptr);
    EXPECT_EQ(*consumer.front(), 10 + i);
    consumer.pop();
  }
  EXPECT_EQ(consumer.front(), nullptr);
  producer.publish();  // nothing staged: nothing appears
  EXPECT_EQ(consumer.front(), nullptr);
}

// Ping-pong where both sides always sleep (spin 0): every round trip needs
// both futex wake-ups. A lost wake-up shows as a wait that only ends at its
// (generous) deadline.
TEST(RingTest, SleepingConsumersAreWokenByEveryPush) {
  constexpr uint64_t kRounds = 20000;
  auto requests = make_ring<uint64_t, 16>();
  auto replies = make_ring<uint64_t, 16>();
  std::atomic<uint64_t> echo_failures{0};
  std::thread echo([&] {
    RingConsumer<uint64_t, 16> in(requests.get());
    RingProducer<uint64_t, 16> out(replies.get());
    for (uint64_t i = 0; i < kRounds; ++i) {
      const auto deadline = after(10s);
      if (!in.wait(deadline, 0) || Clock::now() >= deadline) {
        echo_failures++;
        return;
      }
      const uint64_t v = *in.front();
      in.pop();
      while (!out.try_push(v)) cpu_relax();  // cannot stay full: one in flight
      out.wake_consumer();
    }
  });
  RingProducer<uint64_t, 16> out(requests.get());
  RingConsumer<uint64_t, 16> in(replies.get());
  uint64_t round = 0;
  for (; round < kRounds; ++round) {
    if (!out.try_push(round)) break;  // one in flight: never full
    out.wake_consumer();
    const auto deadline = after(10s);
    if (!in.wait(deadline, 0) || Clock::now() >= deadline) break;
    if (*in.front() != round) break;
    in.pop();
  }
  echo.join();
  EXPECT_EQ(round, kRounds) << "reply missing, late or out of order";
  EXPECT_EQ(echo_failures.load(), 0u);
}

TEST(RingTest, ProducerSeesAWakeRequestOnlyWhileTheConsumerAsksForOne) {
  auto ring = make_ring<uint64_t, 8>();
  RingProducer<uint64_t, 8> producer(ring.get());
  EXPECT_FALSE(producer.consumer_wants_wake());
  ring->consumer_sleeping.store(1);  // what wait() does before it sleeps
  EXPECT_TRUE(producer.consumer_wants_wake());
  producer.wake_consumer();
  EXPECT_EQ(ring->consumer_sleeping.load(), 0u) << "waking clears the request";
  EXPECT_FALSE(producer.consumer_wants_wake());
}

}  // namespace
}  // namespace corepool::shm
