// Submissions: the submitters' side of the pool (see submissions.h). Every
// member is under mu_; nothing here touches libuv or the worker table, so any
// thread may call in. Waking the loop after a change is the caller's job.
#include "supervisor/pool/submissions.h"

#include <time.h>

namespace corepool::pool {
namespace {

// The workers' clock (worker_process.cc's monotonic_ns): one clock for every process.
int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace

void Submissions::enqueue_locked(SegmentTask&& task, int worker) {
  Request req;
  req.id = next_id_++;
  req.task = std::move(task);
  req.submitted_ns = monotonic_ns();
  req.worker = worker;
  pending_.push_back(std::move(req));
}

void Submissions::submit(SegmentTask task) {
  std::unique_lock<std::mutex> lock(mu_);
  space_cv_.wait(lock, [this] { return outstanding_ < depth_; });
  ++outstanding_;
  enqueue_locked(std::move(task));
}

bool Submissions::try_add(std::vector<SegmentTask>& tasks, int worker) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (outstanding_ + tasks.size() > depth_) return false;
    outstanding_ += tasks.size();
    for (auto& t : tasks) enqueue_locked(std::move(t), worker);
  }
  tasks.clear();
  return true;
}

bool Submissions::cancel(uint64_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_requested_) return false;
  cancels_.push_back(stream);
  return true;
}

void Submissions::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return outstanding_ == 0; });
}

void Submissions::request_stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_requested_ = true;
}

bool Submissions::take_pending(std::deque<Request>& plain, std::deque<Request>& follow_ups) {
  std::lock_guard<std::mutex> lock(mu_);
  while (!pending_.empty()) {
    (pending_.front().worker >= 0 ? follow_ups : plain).push_back(std::move(pending_.front()));
    pending_.pop_front();
  }
  return stop_requested_;
}

std::vector<uint64_t> Submissions::take_cancels() {
  std::vector<uint64_t> streams;
  std::lock_guard<std::mutex> lock(mu_);
  streams.swap(cancels_);
  return streams;
}

bool Submissions::stop_requested() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_requested_;
}

void Submissions::completed() {
  std::lock_guard<std::mutex> lock(mu_);
  --outstanding_;
  space_cv_.notify_all();
  if (outstanding_ == 0) idle_cv_.notify_all();
}

size_t Submissions::outstanding() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outstanding_;
}

}  // namespace corepool::pool
