// The soak benchmark's memory time series: a thread that samples, every
// period, the RSS and PSS of a `corepool serve` supervisor and of each of its
// workers (from /proc) and the supervisor's jemalloc statistics (from its
// /metrics), and the summary figures of a series. The Sampler must be
// finish()ed before the server it watches is stopped.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace soak {

struct Sample {
  double t_s = 0;       // since the load started
  double audio_s = 0;   // audio answered by then (a step at each answer)
  double audio_x_s = 0; // audio_s interpolated linearly between answers (smooth_audio()): the x axis
  bool idle = false;    // taken after the last answer
  long sup_rss_kb = 0, sup_pss_kb = 0;
  long workers_rss_kb = 0, workers_pss_kb = 0;  // sums over the workers (process mode)
  long sup_anon_kb = 0, workers_anon_kb = 0;     // anonymous PSS (anon_pss_kb()): the heaps
  int workers = 0;
  // The supervisor's jemalloc stats (bytes), -1 when /metrics has none (glibc).
  double je_allocated = -1, je_active = -1, je_resident = -1, je_mapped = -1, je_retained = -1;

  long total_rss_kb() const { return sup_rss_kb + workers_rss_kb; }
  long total_pss_kb() const { return sup_pss_kb + workers_pss_kb; }
  long total_anon_kb() const { return sup_anon_kb + workers_anon_kb; }
};

class Sampler {
 public:
  // `audio_done` is called from the sampling thread: seconds of audio answered.
  Sampler(pid_t server, int port, std::chrono::milliseconds period, std::function<double()> audio_done);
  ~Sampler();  // joins
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Call when the last answer arrived: keeps sampling `idle` longer (to see
  // what the allocator gives back when the load stops), then returns the series.
  std::vector<Sample> finish(std::chrono::milliseconds idle);

 private:
  void run();
  Sample take(double t_s, bool idle);

  const pid_t server_;
  const int port_;
  const std::chrono::milliseconds period_;
  const std::function<double()> audio_done_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point idle_since_{};  // set by finish()
  std::chrono::milliseconds idle_for_{0};
  std::vector<Sample> samples_;
  std::string error_;  // a failed /metrics read, reported by finish()
  std::thread thread_;
};

// Fills audio_x_s: answers arrive a clip at a time, so audio_s is a staircase;
// between two answers the audio processed grows about linearly with time.
void smooth_audio(std::vector<Sample>& series);

// Peak, mean and growth of one measure of a series, in MiB, over the samples
// taken under load. Warm-up is the first 10 % of the audio; the baseline is the
// mean over the next 10 % (audio 10-20 %), the end the mean over the last 10 %
// (audio 90-100 %), by audio_x_s; growth = end / baseline - 1 (NaN when a
// window holds no sample: too short a run). `idle` is the last sample.
struct Figures {
  double peak = 0, mean = 0, baseline = 0, end = 0, growth = 0, idle = 0;
};
Figures figures_of(const std::vector<Sample>& series, double total_audio_s, long (Sample::*measure)() const);
Figures figures_of(const std::vector<Sample>& series, double total_audio_s, long Sample::*field);
// The peak of a jemalloc statistic in MiB, -1 when absent.
double peak_of(const std::vector<Sample>& series, double Sample::*field);

}  // namespace soak
