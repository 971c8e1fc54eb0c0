// Runs tasks one at a time, in the order they were posted, on a thread of its
// own. The batch drivers commit finished result files here (commit_input.h:
// flush, fsync, rename, in groups; about 1 ms a file on this VM's disk) so
// that the thread whose result finished a file, an engine thread in thread
// mode, goes straight back to its next batch instead of waiting on the disk
// while holding up every other result.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace corepool {

class SerialWorker {
 public:
  SerialWorker();
  // Runs every task still queued, then joins the thread.
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  void post(std::function<void()> task);
  // Tasks posted and not yet started. A task that sees 0 is the last one
  // posted so far (the drivers' commits sync their directories then).
  size_t queued();
  // Returns once every task posted before the call has run. A task that threw
  // is rethrown here (the first one; the tasks after it still ran).
  void drain();

 private:
  void run();

  std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  std::deque<std::function<void()>> tasks_;
  bool running_ = false;  // a task is out of the queue and not yet finished
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace corepool
