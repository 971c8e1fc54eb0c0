// Lock-free single-producer single-consumer ring of fixed-size descriptors in
// shared memory. RingData is placement-new'd into a Segment by the supervisor
// before fork(); each side then wraps it in a process-local RingProducer or
// RingConsumer, which caches the other side's index. The Segment must outlive
// both wrappers. Descriptors carry slab offsets, never pointers.
#pragma once

#include <atomic>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shm/wake.h"

namespace corepool::shm {

inline constexpr std::size_t kCacheLine = 64;

// The shared part: indices, the futex word and the slots. Nothing in it points
// anywhere, so every process may map it at its own address. Indices are 64-bit
// and only ever grow (a wrap would take centuries), so head == tail means empty
// and tail - head == N means full without a wasted slot.
template <typename T, uint32_t N>
struct RingData {
  static_assert(std::is_trivially_copyable_v<T>,
                "descriptors are copied byte-wise between processes");
  static_assert(N >= 2 && (N & (N - 1)) == 0, "N must be a power of two: slot = index & (N - 1)");
  static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                    std::atomic<uint32_t>::is_always_lock_free,
                "a lock-based atomic would put a process-local lock into shared memory");

  // Next index to pop. Written only by the consumer; head <= tail always.
  alignas(kCacheLine) std::atomic<uint64_t> head{0};
  // Next index to push. Written only by the producer; tail - head <= N always.
  alignas(kCacheLine) std::atomic<uint64_t> tail{0};
  // Futex word: 1 while the consumer sleeps or wants to be woken. The consumer
  // sets it; the producer reads it after each push and clears it when waking.
  alignas(kCacheLine) std::atomic<uint32_t> consumer_sleeping{0};
  // slots[i & (N - 1)] holds descriptor i for head <= i < tail. Own cache lines,
  // so writing a slot never invalidates the line holding an index.
  alignas(kCacheLine) T slots[N];
};

// Process-local checks that RingData may live in shared memory. (std::atomic is
// not copyable, so the struct itself is not trivially copyable; what matters is
// that it has one layout for every process and needs no destructor.)
template <typename T, uint32_t N>
constexpr bool ring_data_is_shareable() {
  using Data = RingData<T, N>;
  return std::is_standard_layout_v<Data> && std::is_trivially_destructible_v<Data> &&
         alignof(Data) == kCacheLine && sizeof(Data) % kCacheLine == 0;
}

// The only writer of `tail`. Call try_push() then wake_consumer() (futex
// consumers), or consumer_wants_wake() then signal_eventfd() (eventfd consumers;
// never wake_consumer() there: it would clear their standing wake request).
template <typename T, uint32_t N>
class RingProducer {
  static_assert(ring_data_is_shareable<T, N>());

 public:
  explicit RingProducer(RingData<T, N>* ring)
      : ring_(ring), head_cache_(ring->head.load(std::memory_order_acquire)) {
    assert(reinterpret_cast<std::uintptr_t>(ring) % kCacheLine == 0);
  }

  // Copies `v` into the next slot. Returns false, changing nothing, when full:
  // the caller must decide what a full ring means (retry, or a broken peer).
  [[nodiscard]] bool try_push(const T& v) {
    if (!try_stage(v)) return false;
    publish();
    return true;
  }

  // Copies `v` into the next slot without showing it to the consumer: publish()
  // shows every staged descriptor at once. A consumer that is awake while a
  // group is written (a worker back from its last call) then finds the whole
  // group, not its first few as a batch of their own. False, changing nothing,
  // when the ring is full.
  [[nodiscard]] bool try_stage(const T& v) {
    // Relaxed: this object is the only writer of tail, it reads its own store.
    const uint64_t tail = ring_->tail.load(std::memory_order_relaxed) + staged_;
    // head_cache_ <= head, so tail - head_cache_ <= N: the ring can only look
    // fuller than it is, never emptier.
    if (tail - head_cache_ == N) {
      // Acquire: pairs with pop()'s release, so the consumer's reads of the
      // slot we are about to overwrite are finished.
      head_cache_ = ring_->head.load(std::memory_order_acquire);
      if (tail - head_cache_ == N) return false;
    }
    ring_->slots[tail & (N - 1)] = v;  // free: index tail is not in [head, tail)
    ++staged_;
    return true;
  }

  // Shows the staged descriptors to the consumer (none staged: nothing).
  void publish() {
    if (staged_ == 0) return;
    // Release: the slots' bytes are visible before the consumer can see the new tail.
    ring_->tail.store(ring_->tail.load(std::memory_order_relaxed) + staged_, std::memory_order_release);
    staged_ = 0;
  }

  // Between 0 and N; exact when the consumer is idle.
  uint32_t size_approx() const {
    const uint64_t head = ring_->head.load(std::memory_order_acquire);
    return static_cast<uint32_t>(ring_->tail.load(std::memory_order_relaxed) - head);
  }

  // True when the consumer is asleep (or, eventfd style, always wants a signal).
  // Call after try_push(): the fence orders our tail store before this load.
  bool consumer_wants_wake() const {
    // Store-load fence, paired with the one in RingConsumer::wait(): of the two
    // fences one comes first, so either the consumer's re-check sees our new
    // tail, or we see its consumer_sleeping = 1 here. A wake-up is never lost.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ring_->consumer_sleeping.load(std::memory_order_relaxed) != 0;
  }

  // Wakes a consumer sleeping in RingConsumer::wait(). Costs one fence when the
  // consumer is awake, a system call only when it sleeps.
  void wake_consumer() {
    if (!consumer_wants_wake()) return;
    // Clear before waking: a consumer that has not yet reached FUTEX_WAIT then
    // gets EAGAIN (word != 1) and re-checks, instead of sleeping past the push.
    if (ring_->consumer_sleeping.exchange(0, std::memory_order_relaxed) != 0) {
      futex_wake(&ring_->consumer_sleeping, 1);
    }
  }

  // Wakes the consumer whether or not it asked, so that it re-checks a word
  // outside the ring (a stop request) now rather than at its wait deadline.
  // Futex consumers only, like wake_consumer().
  void force_wake_consumer() {
    ring_->consumer_sleeping.store(0, std::memory_order_relaxed);
    futex_wake(&ring_->consumer_sleeping, 1);
  }

 private:
  RingData<T, N>* ring_;
  uint64_t head_cache_;  // last head we read: head_cache_ <= head
  uint32_t staged_ = 0;  // written past tail, not yet published
};

// The only writer of `head`. front() then pop() to consume; wait() to block.
template <typename T, uint32_t N>
class RingConsumer {
  static_assert(ring_data_is_shareable<T, N>());

 public:
  explicit RingConsumer(RingData<T, N>* ring)
      : ring_(ring), tail_cache_(ring->head.load(std::memory_order_relaxed)) {
    assert(reinterpret_cast<std::uintptr_t>(ring) % kCacheLine == 0);
  }

  // The oldest descriptor, or nullptr when empty. Valid until pop().
  T* front() {
    // Relaxed: this object is the only writer of head.
    const uint64_t head = ring_->head.load(std::memory_order_relaxed);
    // tail_cache_ <= tail, so the ring can only look emptier than it is.
    if (head == tail_cache_) {
      // Acquire: pairs with try_push()'s release, so the slot's bytes are visible.
      tail_cache_ = ring_->tail.load(std::memory_order_acquire);
      if (head == tail_cache_) return nullptr;
      // A producer never gets more than N ahead: a tail beyond that was written
      // by a corrupted peer. Read nothing more from this ring rather than loop
      // over garbage (with a tail near 2^64, for ever).
      if (tail_cache_ - head > N) {
        corrupt_ = true;
        tail_cache_ = head;
        return nullptr;
      }
    }
    return &ring_->slots[head & (N - 1)];
  }

  // Eventfd flavour: the consumer never sleeps on the futex word but polls an
  // eventfd, so it wants a signal after every push, for good. Call once,
  // before the producer's first push; never call wait() on this ring then.
  void always_want_wake() { ring_->consumer_sleeping.store(1); }

  // True once front() has seen a tail more than N ahead of head: the producer
  // is corrupted and the ring stays empty for good.
  bool corrupt() const { return corrupt_; }

  // Releases the descriptor front() returned. Only after a non-null front().
  void pop() {
    const uint64_t head = ring_->head.load(std::memory_order_relaxed);
    assert(head != tail_cache_ && "pop() without a successful front()");
    // Release: our reads of the slot happen before the producer may reuse it.
    ring_->head.store(head + 1, std::memory_order_release);
  }

  // Between 0 and N; exact when the producer is idle.
  uint32_t size_approx() const {
    const uint64_t head = ring_->head.load(std::memory_order_relaxed);
    return static_cast<uint32_t>(ring_->tail.load(std::memory_order_acquire) - head);
  }

  // Returns true as soon as the ring is non-empty, false at `deadline` if it is
  // still empty then, or as soon as `*stop` (a word outside the ring that the
  // producer sets before force_wake_consumer()) is non-zero. Spins
  // `spin_iterations` pauses first (cheap when the producer is close behind),
  // then sleeps on the futex word until the producer's wake_consumer(). Not
  // for eventfd rings, whose consumer_sleeping stays 1 for good.
  bool wait(std::chrono::steady_clock::time_point deadline, uint32_t spin_iterations = 2000,
            const std::atomic<uint32_t>* stop = nullptr) {
    for (uint32_t i = 0; i < spin_iterations; ++i) {
      if (front() != nullptr) return true;
      cpu_relax();
    }
    for (;;) {
      ring_->consumer_sleeping.store(1, std::memory_order_relaxed);
      // Store-load fence, paired with RingProducer::consumer_wants_wake(). The
      // two seq_cst fences are totally ordered: if ours is first, the producer's
      // load after its fence sees sleeping = 1 and wakes us; if the producer's is
      // first, our tail load in front() below sees its push. Never neither.
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (front() != nullptr) break;
      // A stop set before its force wake: seen here, or the wake clears the
      // word and the futex_wait below does not sleep (or is woken). Without
      // this check a woken consumer slept on to its deadline (a worker asked
      // to stop took up to its 100 ms wait to notice: every process-mode
      // batch run ended that much later than its last result).
      if (stop && stop->load(std::memory_order_acquire) != 0) {
        ring_->consumer_sleeping.store(0, std::memory_order_relaxed);
        return false;
      }
      // The kernel re-checks word == 1 atomically with queueing us: a producer
      // that cleared it in between makes this return -EAGAIN, not sleep.
      const int rc = futex_wait(&ring_->consumer_sleeping, 1, deadline);
      if (rc == -ETIMEDOUT || std::chrono::steady_clock::now() >= deadline) {
        ring_->consumer_sleeping.store(0, std::memory_order_relaxed);
        return front() != nullptr;
      }
      // 0 (woken, maybe spuriously) or -EAGAIN (already cleared): re-check.
    }
    // Awake again: spare the producer its futex_wake() system calls.
    ring_->consumer_sleeping.store(0, std::memory_order_relaxed);
    return true;
  }

 private:
  RingData<T, N>* ring_;
  uint64_t tail_cache_;  // last tail we read: tail_cache_ <= tail
  bool corrupt_ = false;
};

}  // namespace corepool::shm
