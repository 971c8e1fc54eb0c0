// Samples are taken on a fixed schedule (next tick = previous tick + period),
// so that a slow /metrics answer delays one sample but does not thin the series.
#include "bench/soak_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "bench/soak_http.h"
#include "bench/soak_server.h"
#include "supervisor/pool/process_memory.h"

namespace soak {
namespace {

using Clock = std::chrono::steady_clock;

// corepool_allocator_bytes{stat="NAME"} from a /metrics text; -1 when absent.
double allocator_stat(const std::string& metrics, const std::string& name) {
  const std::string key = "corepool_allocator_bytes{stat=\"" + name + "\"} ";
  const size_t at = metrics.find(key);
  return at == std::string::npos ? -1 : std::strtod(metrics.c_str() + at + key.size(), nullptr);
}

double mean_where(const std::vector<Sample>& series, const std::function<bool(const Sample&)>& in,
                  const std::function<double(const Sample&)>& value) {
  double sum = 0;
  long n = 0;
  for (const auto& s : series) {
    if (!in(s)) continue;
    sum += value(s);
    ++n;
  }
  return n ? sum / n : std::nan("");
}

Figures figures_by(const std::vector<Sample>& series, double total_audio_s,
                   const std::function<double(const Sample&)>& mib) {
  Figures f;
  const auto load = [](const Sample& s) { return !s.idle; };
  for (const auto& s : series) {
    if (!s.idle) f.peak = std::max(f.peak, mib(s));
  }
  f.mean = mean_where(series, load, mib);
  f.baseline = mean_where(series, [&](const Sample& s) {
    return !s.idle && s.audio_x_s > 0.1 * total_audio_s && s.audio_x_s <= 0.2 * total_audio_s;
  }, mib);
  f.end = mean_where(series, [&](const Sample& s) { return !s.idle && s.audio_x_s > 0.9 * total_audio_s; }, mib);
  f.growth = f.end / f.baseline - 1;
  f.idle = series.empty() ? 0 : mib(series.back());
  return f;
}

}  // namespace

Sampler::Sampler(pid_t server, int port, std::chrono::milliseconds period, std::function<double()> audio_done)
    : server_(server), port_(port), period_(period), audio_done_(std::move(audio_done)) {
  thread_ = std::thread([this] { run(); });
}

Sampler::~Sampler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Sample Sampler::take(double t_s, bool idle) {
  Sample s;
  s.t_s = t_s;
  s.audio_s = audio_done_();
  s.idle = idle;
  const corepool::ProcessMemory sup = corepool::read_process_memory(server_);
  s.sup_rss_kb = sup.rss_kb;
  s.sup_pss_kb = sup.pss_kb;
  s.sup_anon_kb = anon_pss_kb(server_);
  for (pid_t worker : children_of(server_)) {
    const corepool::ProcessMemory m = corepool::read_process_memory(worker);
    if (m.rss_kb < 0) continue;  // exited between the two reads
    s.workers_rss_kb += m.rss_kb;
    s.workers_pss_kb += m.pss_kb;
    s.workers_anon_kb += std::max(0L, anon_pss_kb(worker));
    ++s.workers;
  }
  return s;
}

void Sampler::run() {
  HttpClient metrics(port_, 10);
  const auto t0 = Clock::now();
  for (auto tick = t0;; tick += period_) {
    bool idle = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_until(lock, tick, [this] { return stopping_; });
      if (stopping_) return;
      idle = idle_since_ != Clock::time_point{};
    }
    Sample s = take(std::chrono::duration<double>(tick - t0).count(), idle);
    try {
      const std::string text = metrics.request("GET", "/metrics").body;
      s.je_allocated = allocator_stat(text, "allocated");
      s.je_active = allocator_stat(text, "active");
      s.je_resident = allocator_stat(text, "resident");
      s.je_mapped = allocator_stat(text, "mapped");
      s.je_retained = allocator_stat(text, "retained");
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu_);
      if (error_.empty()) error_ = e.what();
    }
    std::lock_guard<std::mutex> lock(mu_);
    samples_.push_back(s);
    if (idle && tick - idle_since_ >= idle_for_) {
      stopping_ = true;
      cv_.notify_all();
      return;
    }
  }
}

std::vector<Sample> Sampler::finish(std::chrono::milliseconds idle) {
  std::unique_lock<std::mutex> lock(mu_);
  idle_since_ = Clock::now();
  idle_for_ = idle;
  // The sampling thread ends the idle window itself (on its own schedule).
  cv_.wait(lock, [this] { return stopping_; });
  lock.unlock();
  if (thread_.joinable()) thread_.join();
  if (!error_.empty()) throw std::runtime_error("GET /metrics failed while sampling: " + error_);
  smooth_audio(samples_);
  return samples_;
}

void smooth_audio(std::vector<Sample>& series) {
  // Knots: the start, and each sample at which more audio had been answered.
  std::vector<std::pair<double, double>> knots;  // (t_s, audio_s)
  for (const auto& s : series) {
    if (knots.empty() || s.audio_s > knots.back().second) knots.emplace_back(s.t_s, s.audio_s);
  }
  size_t k = 0;
  for (auto& s : series) {
    while (k + 1 < knots.size() && knots[k + 1].first <= s.t_s) ++k;
    if (k + 1 == knots.size()) {
      s.audio_x_s = knots.empty() ? 0 : knots[k].second;
      continue;
    }
    const auto [t0, a0] = knots[k];
    const auto [t1, a1] = knots[k + 1];
    s.audio_x_s = a0 + (a1 - a0) * (s.t_s - t0) / (t1 - t0);
  }
}

Figures figures_of(const std::vector<Sample>& series, double total_audio_s, long (Sample::*measure)() const) {
  return figures_by(series, total_audio_s, [measure](const Sample& s) { return (s.*measure)() / 1024.0; });
}

Figures figures_of(const std::vector<Sample>& series, double total_audio_s, long Sample::*field) {
  return figures_by(series, total_audio_s, [field](const Sample& s) { return s.*field / 1024.0; });
}

double peak_of(const std::vector<Sample>& series, double Sample::*field) {
  double peak = -1;
  for (const auto& s : series) peak = std::max(peak, s.*field < 0 ? -1 : s.*field / (1024.0 * 1024.0));
  return peak;
}

}  // namespace soak
