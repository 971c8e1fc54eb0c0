// Wake-ups across processes for the rings: futex wait/wake on a 32-bit word in
// shared memory (ring.h's RingConsumer::wait and RingProducer::wake_consumer),
// and the eventfd that a consumer living in a libuv loop polls instead (the
// supervisor's completion rings). Owns nothing: the word lives in a Segment,
// the eventfd belongs to whoever called make_eventfd() and must be closed by it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace corepool::shm {

// One polite iteration of a spin loop: tells the core we are spinning so the
// sibling hyper-thread gets the pipeline and the exit from the loop is cheap.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

// Sleeps while *word == expected, until futex_wake() on the same word (from any
// process that maps it: the futex is shared, never FUTEX_PRIVATE) or until
// `deadline`. Returns 0 when woken (possibly spuriously: re-check your
// condition), -EAGAIN when *word != expected on entry, -ETIMEDOUT at the
// deadline, other -errno on misuse. EINTR is retried against the same deadline.
int futex_wait(std::atomic<uint32_t>* word, uint32_t expected,
               std::chrono::steady_clock::time_point deadline);

// Wakes up to `count` waiters on `word`. Returns how many were woken, or -errno.
int futex_wake(std::atomic<uint32_t>* word, int count = 1);

// A non-blocking eventfd (EFD_NONBLOCK | EFD_CLOEXEC; fork() still inherits it,
// only an exec() drops it). Returns the fd or -errno.
int make_eventfd();

// Adds 1 to the eventfd's counter so its poller wakes. Returns 0 or -errno;
// EINTR is retried, and EAGAIN (counter saturated, the poller is already due
// to wake) counts as success.
int signal_eventfd(int fd);

// Reads and resets the eventfd's counter. Returns how many signals arrived
// since the last drain (saturated at INT32_MAX), 0 if none, or -errno.
int drain_eventfd(int fd);

}  // namespace corepool::shm
