// What one benchmark point costs the host, read from /proc while it runs: a
// sampler thread records the resident (RSS) and proportional (PSS) memory of
// this process plus its children (process mode's workers) every interval, and
// the window between mark_start() and mark_end() gets the CPU time and the
// voluntary / involuntary context switches of the same processes. The sampler
// keeps its own cost within 1 % of one cpu: every interval (100 ms by
// default), or less often when a sample takes over 1 % of that (bench
// processes of hundreds of MB: a few samples a second).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace corepool {

struct MemorySample {
  double seconds = 0;  // since the probe started
  long rss_kb = 0;     // this process + its children
  long pss_kb = 0;
};

struct CpuCounters {
  double cpu_seconds = 0;  // user + system
  uint64_t voluntary_switches = 0;
  uint64_t involuntary_switches = 0;
};

struct ProbeWindow {
  double seconds = 0;
  CpuCounters used;             // end - start
  long rss_peak_kb = 0, rss_avg_kb = 0, pss_peak_kb = 0, pss_avg_kb = 0;  // samples inside the window
  // jemalloc's stats of this process at the end of the window (empty on glibc).
  std::vector<std::pair<std::string, uint64_t>> allocator;
};

// This process and its live children (found by parent pid in /proc).
CpuCounters read_cpu_counters();
std::vector<int> child_pids();

// The sampler's pause after a sample that cost `cost_seconds` of cpu: the
// interval, or long enough that sampling takes at most 1 % of one cpu.
double sampler_pause_seconds(double cost_seconds, int interval_ms);

class ResourceProbe {
 public:
  explicit ResourceProbe(int interval_ms = 100);
  ~ResourceProbe();
  ResourceProbe(const ResourceProbe&) = delete;
  ResourceProbe& operator=(const ResourceProbe&) = delete;

  // Call from the measuring thread at the start and the end of the timed work,
  // while the children still run.
  void mark_start();
  void mark_end();

  ProbeWindow window() const;
  std::vector<MemorySample> samples() const;  // the whole run, start-up included

 private:
  double sample();  // returns the sample's time
  double now() const;

  const int interval_ms_;
  const double origin_;
  mutable std::mutex mu_;
  std::vector<MemorySample> samples_;
  CpuCounters start_counters_, end_counters_;
  std::vector<std::pair<std::string, uint64_t>> end_allocator_;
  double start_ = -1, end_ = -1;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace corepool
