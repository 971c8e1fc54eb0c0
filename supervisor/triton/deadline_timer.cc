// DeadlineTimer: an ordered map of (when, id) -> callback and one thread that
// waits on a condition variable until the first entry is due. add() wakes it
// only when the new entry becomes the earliest.
#include "supervisor/triton/deadline_timer.h"

namespace corepool {

DeadlineTimer::DeadlineTimer() : thread_([this] { run(); }) {}

DeadlineTimer::~DeadlineTimer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

DeadlineTimer::Id DeadlineTimer::add(Clock::time_point when, std::function<void()> fn) {
  bool earliest = false;
  Id id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_++;
    earliest = due_.empty() || when < due_.begin()->first.first;
    due_.emplace(std::make_pair(when, id), std::move(fn));
    when_.emplace(id, when);
  }
  if (earliest) cv_.notify_all();
  return id;
}

void DeadlineTimer::cancel(Id id) {
  std::function<void()> dropped;  // destroyed outside the lock: it may own the last reference to anything
  std::lock_guard<std::mutex> lock(mu_);
  auto it = when_.find(id);
  if (it == when_.end()) return;
  auto entry = due_.find({it->second, id});
  dropped = std::move(entry->second);
  due_.erase(entry);
  when_.erase(it);
}

size_t DeadlineTimer::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return due_.size();
}

void DeadlineTimer::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (due_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const Clock::time_point first = due_.begin()->first.first;
    if (Clock::now() < first) {
      cv_.wait_until(lock, first);
      continue;
    }
    auto entry = due_.begin();
    std::function<void()> fn = std::move(entry->second);
    when_.erase(entry->first.second);
    due_.erase(entry);
    lock.unlock();
    fn();
    fn = nullptr;  // release what it holds before taking the lock again
    lock.lock();
  }
}

}  // namespace corepool
