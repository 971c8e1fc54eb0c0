// The batch progress bar: on a TTY, one line on stderr redrawn four times a
// second (files, segments, audio seconds per second = x-real-time, ETA); on a
// pipe it prints nothing. Error lines go through print_line so they never
// mingle with a half-drawn bar. Owned by one batch run.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace corepool {

class Progress {
 public:
  Progress(bool enabled, size_t total_files, double total_audio_seconds);
  ~Progress();  // stops the drawing thread and leaves the final line in place
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void add_segments(uint64_t n) { segments_ += n; }
  void add_audio_seconds(double s);
  void file_done() { ++files_done_; }

  // Prints one line to stderr, clearing the bar first when it is drawn.
  void print_line(const std::string& line);

  // "12/40 files  1830 segments  915.0 s audio  61.2x real time  ETA 0:14"
  std::string render() const;

 private:
  void loop();

  const bool enabled_;
  const size_t total_files_;
  const double total_audio_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<size_t> files_done_{0};
  std::atomic<uint64_t> segments_{0};
  std::atomic<uint64_t> audio_millis_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace corepool
