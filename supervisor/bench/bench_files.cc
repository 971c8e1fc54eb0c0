// The result files' columns and keys are a format others read (scripts,
// RESULTS.md): read_json throws, naming the file, when a field is missing
// rather than redrawing from a guess.
#include "supervisor/bench/bench_files.h"

#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "supervisor/bench/bench_queries.h"
#include "supervisor/bench/bench_summary.h"

namespace corepool {

using nlohmann::json;
using bench::format;

std::vector<PointSummary> read_json(const std::string& path, json* host) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("bench: cannot read " + path);
  json all;
  try {
    all = json::parse(in);
  } catch (const json::exception& e) {
    throw std::runtime_error("bench: " + path + " is not JSON: " + e.what());
  }
  std::vector<PointSummary> out;
  try {
    *host = all.at("host");
    for (const auto& p : all.at("points")) {
      PointSummary s;
      s.point.kind = p.at("kind");
      s.point.workers = p.at("workers");
      s.point.intra_op = p.at("intra_op");
      s.point.allocator = p.at("allocator");
      s.runs = p.at("runs");
      s.segments = p.at("segments");
      s.seconds = p.at("seconds");
      s.seconds_min = p.at("seconds_min");
      s.seconds_max = p.at("seconds_max");
      s.spread = p.at("spread");
      s.rate = p.at("segments_per_s");
      s.x_real_time = p.at("x_real_time");
      s.p50_ms = p.at("latency_ms").at("p50");
      s.p95_ms = p.at("latency_ms").at("p95");
      s.p99_ms = p.at("latency_ms").at("p99");
      s.cpu_util = p.at("cpu_util");
      s.voluntary = p.at("voluntary_switches");
      s.involuntary = p.at("involuntary_switches");
      s.rss_peak_mb = p.at("rss_mb").at("peak");
      s.rss_avg_mb = p.at("rss_mb").at("avg");
      s.pss_peak_mb = p.at("pss_mb").at("peak");
      s.pss_avg_mb = p.at("pss_mb").at("avg");
      s.memory = p.at("memory_over_time").at("samples");
      s.jemalloc = p.value("jemalloc_bytes", json::object());
      s.batch = p.value("batch", 0);
      s.optimize = p.value("optimize", std::string());
      s.rates = p.value("rates", std::vector<double>{});
      s.phases = phases_from_json(p.value("phases", json::object()));
      out.push_back(s);
    }
  } catch (const json::exception& e) {
    throw std::runtime_error("bench: " + path + " lacks a field corepool bench writes: " + e.what());
  }
  return out;
}

void write_csv(const std::string& path, const std::vector<PointSummary>& points) {
  std::ofstream out(path);
  out << "kind,workers,intra_op,allocator,runs,segments,seconds,seconds_min,seconds_max,spread,segments_per_s,"
         "x_real_time,latency_p50_ms,latency_p95_ms,latency_p99_ms,latency_of,cpu_util,voluntary_switches,"
         "involuntary_switches,rss_peak_mb,rss_avg_mb,pss_peak_mb,pss_avg_mb,jemalloc_allocated_mb,jemalloc_active_mb,"
         "jemalloc_resident_mb,jemalloc_mapped_mb,optimize,batch\n";
  for (const auto& p : points) {
    char buf[1024];
    std::snprintf(buf, sizeof buf,
                  "%s,%d,%d,%s,%d,%.0f,%.4f,%.4f,%.4f,%.4f,%.2f,%.2f,%.3f,%.3f,%.3f,%s,%.4f,%.0f,%.0f,%.1f,%.1f,%.1f,"
                  "%.1f\n",
                  p.point.kind.c_str(), p.point.workers, p.point.intra_op, p.point.allocator.c_str(), p.runs,
                  p.segments, p.seconds, p.seconds_min, p.seconds_max, p.spread, p.rate, p.x_real_time, p.p50_ms,
                  p.p95_ms, p.p99_ms, latency_meaning(p.point.kind).c_str(), p.cpu_util, p.voluntary,
                  p.involuntary, p.rss_peak_mb, p.rss_avg_mb, p.pss_peak_mb, p.pss_avg_mb);
    std::string line = buf;
    line.pop_back();  // the newline: the allocator columns follow
    for (const char* stat : {"allocated", "active", "resident", "mapped"}) {
      line += p.jemalloc.contains(stat) ? format(",%.1f", p.jemalloc[stat].get<double>() / (1 << 20)) : ",";
    }
    out << line << "," << p.optimize << "," << p.batch << "\n";
  }
  if (!out) throw std::runtime_error("bench: cannot write " + path);
}

void write_json(const std::string& path, const json& host, const std::vector<PointSummary>& points,
                const std::vector<std::string>& verdict) {
  json list = json::array();
  for (const auto& p : points) {
    list.push_back({{"kind", p.point.kind}, {"workers", p.point.workers}, {"intra_op", p.point.intra_op},
                    {"allocator", p.point.allocator}, {"runs", p.runs}, {"segments", p.segments},
                    {"seconds", p.seconds}, {"seconds_min", p.seconds_min}, {"seconds_max", p.seconds_max},
                    {"spread", p.spread}, {"segments_per_s", p.rate}, {"x_real_time", p.x_real_time},
                    {"latency_ms", {{"p50", p.p50_ms}, {"p95", p.p95_ms}, {"p99", p.p99_ms},
                                    {"of", latency_meaning(p.point.kind)}}},
                    {"cpu_util", p.cpu_util}, {"voluntary_switches", p.voluntary},
                    {"involuntary_switches", p.involuntary},
                    {"rss_mb", {{"peak", p.rss_peak_mb}, {"avg", p.rss_avg_mb}}},
                    {"pss_mb", {{"peak", p.pss_peak_mb}, {"avg", p.pss_avg_mb}}},
                    {"jemalloc_bytes", p.jemalloc}, {"optimize", p.optimize}, {"batch", p.batch},
                    {"rates", p.rates}, {"phases", phases_to_json(p.phases)},
                    {"memory_over_time", {{"columns", {"seconds", "rss_kb", "pss_kb"}}, {"samples", p.memory}}}});
  }
  std::ofstream out(path);
  out << json{{"host", host}, {"points", list}, {"verdict", verdict}}.dump(1) << "\n";
  if (!out) throw std::runtime_error("bench: cannot write " + path);
}

}  // namespace corepool
