// Medians, not means: a repeat disturbed by another process on the host moves
// a mean but not the median of three. The memory series kept is that of the
// run closest to the median time, so that the plot shows a typical run.
#include "supervisor/bench/bench_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "supervisor/bench/bench_stats.h"

namespace corepool {
namespace {

using nlohmann::json;

std::vector<double> field(const std::vector<json>& runs, const std::function<double(const json&)>& get) {
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(get(r));
  return v;
}

// Medians of the runs' "phases" (bench_point.cc); zeros when no run has them.
PointSummary::Phases phases_of(const std::vector<json>& runs) {
  std::vector<PointSummary::Phases> with;
  for (const auto& r : runs) {
    const PointSummary::Phases p = phases_from_json(r.value("phases", json::object()));
    if (p.mean_batch > 0) with.push_back(p);
  }
  PointSummary::Phases p;
  if (with.empty()) return p;
  auto med = [&](double PointSummary::Phases::*field) {
    std::vector<double> v;
    for (const auto& w : with) v.push_back(w.*field);
    return median(v);
  };
  p.input_ms = med(&PointSummary::Phases::input_ms);
  p.infer_ms = med(&PointSummary::Phases::infer_ms);
  p.output_ms = med(&PointSummary::Phases::output_ms);
  p.other_ms = med(&PointSummary::Phases::other_ms);
  p.mean_batch = med(&PointSummary::Phases::mean_batch);
  return p;
}

}  // namespace

PointSummary summarize(const SweepPoint& point, const std::vector<json>& runs, double hop_seconds) {
  PointSummary s;
  s.point = point;
  s.runs = static_cast<int>(runs.size());
  if (runs.empty()) return s;
  const auto secs = field(runs, [](const json& r) { return r["seconds"].get<double>(); });
  s.segments = median(field(runs, [](const json& r) { return r["segments"].get<double>(); }));
  s.seconds = median(secs);
  s.seconds_min = *std::min_element(secs.begin(), secs.end());
  s.seconds_max = *std::max_element(secs.begin(), secs.end());
  s.spread = spread(secs);
  s.rate = s.seconds > 0 ? s.segments / s.seconds : 0;  // one figure: every run of a point has the same work
  for (const auto& r : runs) {
    const double t = r["seconds"].get<double>();
    s.rates.push_back(t > 0 ? r["segments"].get<double>() / t : 0);
  }
  s.phases = phases_of(runs);
  s.x_real_time = s.rate * hop_seconds;
  s.p50_ms = median(field(runs, [](const json& r) { return r["latency_ms"][0].get<double>(); }));
  s.p95_ms = median(field(runs, [](const json& r) { return r["latency_ms"][1].get<double>(); }));
  s.p99_ms = median(field(runs, [](const json& r) { return r["latency_ms"][2].get<double>(); }));
  s.cpu_util = median(field(runs, [](const json& r) { return r["cpu_util"].get<double>(); }));
  s.voluntary = median(field(runs, [](const json& r) { return r["voluntary_switches"].get<double>(); }));
  s.involuntary = median(field(runs, [](const json& r) { return r["involuntary_switches"].get<double>(); }));
  auto mb = [&](const char* key) {
    return median(field(runs, [key](const json& r) { return r[key].get<double>() / 1024.0; }));
  };
  s.rss_peak_mb = mb("rss_peak_kb");
  s.rss_avg_mb = mb("rss_avg_kb");
  s.pss_peak_mb = mb("pss_peak_kb");
  s.pss_avg_mb = mb("pss_avg_kb");
  double nearest = -1;  // the memory series of the run closest to the median time
  for (const auto& r : runs) {
    const double d = std::abs(r["seconds"].get<double>() - s.seconds);
    if (nearest < 0 || d < nearest) {
      nearest = d;
      s.memory = r["memory"];
      s.jemalloc = r.value("jemalloc_bytes", json::object());
      s.batch = r.value("batch", 0);
      s.optimize = r.value("optimize", std::string());
    }
  }
  return s;
}

std::string latency_meaning(const std::string& kind) {
  return kind.rfind("ceiling", 0) == 0 ? "forward() of one batch" : "one segment, submit to result";
}

void print_summary_table(const std::vector<PointSummary>& points) {
  std::printf("\n%-17s %3s %5s %-8s %-6s %5s %8s %6s %9s %7s %8s %8s %8s %5s %9s %9s %8s %8s\n", "kind", "w", "intra",
              "alloc", "opt", "batch", "time s", "spread", "seg/s", "x-rt", "p50 ms", "p95 ms", "p99 ms", "cpu%", "vol cs",
              "invol cs", "PSS pk", "PSS avg");
  for (const auto& p : points) {
    const std::string intra = p.point.intra_op == 0 ? "dflt" : std::to_string(p.point.intra_op);
    std::printf("%-17s %3d %5s %-8s %-6s %5d %8.2f %5.1f%% %9.1f %7.1f %8.1f %8.1f %8.1f %5.0f %9.0f %9.0f %8.0f %8.0f\n",
                p.point.kind.c_str(), p.point.workers, intra.c_str(), p.point.allocator.c_str(), p.optimize.c_str(),
                p.batch, p.seconds,
                p.spread * 100, p.rate, p.x_real_time, p.p50_ms, p.p95_ms, p.p99_ms, p.cpu_util * 100, p.voluntary,
                p.involuntary, p.pss_peak_mb, p.pss_avg_mb);
  }
}

}  // namespace corepool
