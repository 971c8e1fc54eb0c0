// Futex and eventfd system-call wrappers for cross-process wake-ups. Called by
// ring.h on every sleep/wake and by the supervisor's loop for its completion
// eventfds. Owns nothing; every wrapper returns 0 (or a count) or -errno and
// retries EINTR. Logging is the caller's job: it knows which worker and ring.
#include "shm/wake.h"

#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

namespace corepool::shm {
namespace {

// The kernel compares a plain 32-bit int at this address; std::atomic<uint32_t>
// is exactly that object on every platform we build for.
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
static_assert(std::atomic<uint32_t>::is_always_lock_free);

uint32_t* futex_address(std::atomic<uint32_t>* word) {
  return reinterpret_cast<uint32_t*>(word);
}

// steady_clock is CLOCK_MONOTONIC on Linux, the clock FUTEX_WAIT_BITSET's
// absolute timeout uses: a deadline converts without reading any clock.
timespec to_monotonic_timespec(std::chrono::steady_clock::time_point deadline) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      deadline.time_since_epoch()).count();
  if (ns <= 0) return timespec{0, 0};
  return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

}  // namespace

int futex_wait(std::atomic<uint32_t>* word, uint32_t expected,
               std::chrono::steady_clock::time_point deadline) {
  const timespec abs_deadline = to_monotonic_timespec(deadline);
  for (;;) {
    // FUTEX_WAIT_BITSET takes an absolute timeout, so a retry after EINTR keeps
    // the caller's deadline instead of restarting a relative one.
    const long rc = syscall(SYS_futex, futex_address(word), FUTEX_WAIT_BITSET, expected,
                            &abs_deadline, nullptr, FUTEX_BITSET_MATCH_ANY);
    if (rc == 0) return 0;
    if (errno != EINTR) return -errno;
  }
}

int futex_wake(std::atomic<uint32_t>* word, int count) {
  const long rc = syscall(SYS_futex, futex_address(word), FUTEX_WAKE, count, nullptr, nullptr, 0);
  return rc < 0 ? -errno : static_cast<int>(rc);
}

int make_eventfd() {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  return fd < 0 ? -errno : fd;
}

int signal_eventfd(int fd) {
  const uint64_t one = 1;
  for (;;) {
    if (write(fd, &one, sizeof one) == static_cast<ssize_t>(sizeof one)) return 0;
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return 0;  // counter at its maximum: the poller is already due
    return -errno;
  }
}

int drain_eventfd(int fd) {
  uint64_t count = 0;
  for (;;) {
    if (read(fd, &count, sizeof count) == static_cast<ssize_t>(sizeof count)) {
      return count > INT32_MAX ? INT32_MAX : static_cast<int>(count);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return 0;  // nothing signalled since the last drain
    return -errno;
  }
}

}  // namespace corepool::shm
