// Children are listed per forking thread in /proc/self/task/TID/children
// (process mode forks from its loop thread). CPU time of a child comes from
// /proc/PID/stat, which sums every thread the process ever had; context
// switches from /proc/PID/task/*/status, which only lists live threads (the
// workers' threads live as long as they do). This process's own counters
// come from getrusage(), exact for exited threads too.
#include "supervisor/bench/resource_probe.h"

#include <dirent.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "supervisor/pool/process_memory.h"

namespace corepool {
namespace {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<std::string> proc_entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] >= '0' && e->d_name[0] <= '9') out.emplace_back(e->d_name);
    }
    ::closedir(d);
  }
  return out;
}

// The fields of /proc/PID/stat after the command name (which may hold spaces).
std::vector<std::string> stat_fields(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> fields;
  const auto close = text.rfind(')');
  if (close == std::string::npos) return fields;
  std::istringstream rest(text.substr(close + 2));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;  // fields[0] is the state (field 3 of proc(5))
}

void add_switches(const std::string& status_path, CpuCounters& c) {
  std::ifstream in(status_path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) {
      c.voluntary_switches += std::strtoull(line.c_str() + 24, nullptr, 10);
    }
    if (line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) {
      c.involuntary_switches += std::strtoull(line.c_str() + 27, nullptr, 10);
    }
  }
}

void add_child(int pid, CpuCounters& c) {
  const std::string dir = "/proc/" + std::to_string(pid);
  const auto f = stat_fields(dir + "/stat");
  if (f.size() < 13) return;  // gone meanwhile
  static const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  c.cpu_seconds += (std::stod(f[11]) + std::stod(f[12])) / tick;  // utime, stime (fields 14, 15)
  for (const auto& tid : proc_entries(dir + "/task")) add_switches(dir + "/task/" + tid + "/status", c);
}

}  // namespace

std::vector<int> child_pids() {
  std::vector<int> out;
  for (const auto& tid : proc_entries("/proc/self/task")) {
    std::ifstream in("/proc/self/task/" + tid + "/children");
    for (int pid; in >> pid;) out.push_back(pid);
  }
  return out;
}

CpuCounters read_cpu_counters() {
  CpuCounters c;
  rusage self{};
  ::getrusage(RUSAGE_SELF, &self);
  auto secs = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  c.cpu_seconds = secs(self.ru_utime) + secs(self.ru_stime);
  c.voluntary_switches = static_cast<uint64_t>(self.ru_nvcsw);
  c.involuntary_switches = static_cast<uint64_t>(self.ru_nivcsw);
  for (int pid : child_pids()) add_child(pid, c);
  return c;
}

namespace {

// CPU time of the calling thread: what a sample costs the host, not the
// wall time it waited for a cpu.
double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

}  // namespace

// A PSS read walks every page table entry of the process (smaps_rollup):
// about 11 ms at CNN10's 300 MB, so a fixed 100 ms interval took 10 % of a
// cpu (5 % of a 2-cpu host) from the very work it measured.
double sampler_pause_seconds(double cost_seconds, int interval_ms) {
  constexpr double kBudget = 0.01;
  return std::max(interval_ms / 1e3, cost_seconds * (1 - kBudget) / kBudget);
}

ResourceProbe::ResourceProbe(int interval_ms) : interval_ms_(interval_ms), origin_(wall_seconds()) {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(stop_mu_);
    while (!stop_) {
      lock.unlock();
      const double started = thread_cpu_seconds();
      sample();
      const std::chrono::duration<double> pause(sampler_pause_seconds(thread_cpu_seconds() - started, interval_ms_));
      lock.lock();
      stop_cv_.wait_for(lock, pause, [this] { return stop_; });
    }
  });
}

ResourceProbe::~ResourceProbe() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_one();
  thread_.join();
}

double ResourceProbe::now() const { return wall_seconds() - origin_; }

double ResourceProbe::sample() {
  MemorySample s;
  std::vector<int> pids = child_pids();
  pids.push_back(::getpid());
  for (int pid : pids) {
    const ProcessMemory m = read_process_memory(pid);
    if (m.rss_kb < 0) continue;  // exited between the scan and the read
    s.rss_kb += m.rss_kb;
    s.pss_kb += m.pss_kb;
  }
  // Stamped under the lock: the sampler thread and mark_start()/mark_end()
  // sample concurrently, and samples_ must stay in time order.
  std::lock_guard<std::mutex> lock(mu_);
  s.seconds = now();
  samples_.push_back(s);
  return s.seconds;
}

// A memory reading at each edge, however short the window; the window's
// edges are the times of those readings.
void ResourceProbe::mark_start() {
  const CpuCounters c = read_cpu_counters();
  const double t = sample();
  std::lock_guard<std::mutex> lock(mu_);
  start_counters_ = c;
  start_ = t;
}

void ResourceProbe::mark_end() {
  const CpuCounters c = read_cpu_counters();
  const double t = sample();
  auto allocator = allocator_stats();
  std::lock_guard<std::mutex> lock(mu_);
  end_allocator_ = std::move(allocator);
  end_counters_ = c;
  end_ = t;
}

ProbeWindow ResourceProbe::window() const {
  std::lock_guard<std::mutex> lock(mu_);
  ProbeWindow w;
  if (start_ < 0 || end_ < start_) return w;
  w.seconds = end_ - start_;
  w.allocator = end_allocator_;
  w.used.cpu_seconds = end_counters_.cpu_seconds - start_counters_.cpu_seconds;
  // Switch counts of children that appeared late could make a difference negative; clamp.
  auto diff = [](uint64_t a, uint64_t b) { return a > b ? a - b : 0; };
  w.used.voluntary_switches = diff(end_counters_.voluntary_switches, start_counters_.voluntary_switches);
  w.used.involuntary_switches = diff(end_counters_.involuntary_switches, start_counters_.involuntary_switches);
  long n = 0, rss_sum = 0, pss_sum = 0;
  for (const auto& s : samples_) {
    if (s.seconds < start_ || s.seconds > end_) continue;
    w.rss_peak_kb = std::max(w.rss_peak_kb, s.rss_kb);
    w.pss_peak_kb = std::max(w.pss_peak_kb, s.pss_kb);
    rss_sum += s.rss_kb;
    pss_sum += s.pss_kb;
    ++n;
  }
  if (n > 0) {
    w.rss_avg_kb = rss_sum / n;
    w.pss_avg_kb = pss_sum / n;
  }
  return w;
}

std::vector<MemorySample> ResourceProbe::samples() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samples_;
}

}  // namespace corepool
