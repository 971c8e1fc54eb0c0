// Per-request deadlines for `corepool serve`: one thread sleeps until the
// earliest deadline and runs its callback (an infer call answers
// kDeadlineExceeded there). Owned by ServeService (infer calls hold it
// weakly); a deadline cancelled before it is due never runs, and the
// destructor drops (never runs) the ones still pending.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

namespace corepool {

class DeadlineTimer {
 public:
  using Clock = std::chrono::steady_clock;
  using Id = uint64_t;

  DeadlineTimer();
  ~DeadlineTimer();
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  // Runs `fn` on the timer's thread at `when` unless cancel(id) comes first.
  // `fn` runs outside the timer's lock: it may call add() and cancel().
  Id add(Clock::time_point when, std::function<void()> fn);
  void cancel(Id id);
  size_t pending() const;

 private:
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<Clock::time_point, Id>, std::function<void()>> due_;
  std::unordered_map<Id, Clock::time_point> when_;
  Id next_ = 1;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace corepool
