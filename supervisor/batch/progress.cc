// Drawn from its own thread so that the batch reader, which blocks on a full
// queue, never has to remember to redraw.
#include "supervisor/batch/progress.h"

#include <cstdio>

namespace corepool {
namespace {

std::string clock_text(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

}  // namespace

Progress::Progress(bool enabled, size_t total_files, double total_audio_seconds)
    : enabled_(enabled), total_files_(total_files), total_audio_(total_audio_seconds),
      start_(std::chrono::steady_clock::now()) {
  if (enabled_) thread_ = std::thread([this] { loop(); });
}

Progress::~Progress() {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::fprintf(stderr, "\r\033[K%s\n", render().c_str());
}

void Progress::add_audio_seconds(double s) { audio_millis_ += static_cast<uint64_t>(s * 1000.0); }

void Progress::print_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (enabled_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s\n", line.c_str());
}

std::string Progress::render() const {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double audio = audio_millis_.load() / 1000.0;
  const double speed = elapsed > 0 ? audio / elapsed : 0.0;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%zu/%zu files  %llu segments  %.1f s audio  %.1fx real time",
                files_done_.load(), total_files_, static_cast<unsigned long long>(segments_.load()),
                audio, speed);
  std::string text = buf;
  if (speed > 0 && total_audio_ > audio) text += "  ETA " + clock_text((total_audio_ - audio) / speed);
  return text;
}

void Progress::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    std::fprintf(stderr, "\r\033[K%s", render().c_str());
    std::fflush(stderr);
    cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; });
  }
}

}  // namespace corepool
