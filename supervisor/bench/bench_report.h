// What `corepool bench` makes of its points: the median and spread of each
// configuration over its repeats, results.csv / results.json, the gnuplot
// pictures and a verdict in plain words. Pure functions of the points' JSON
// (bench_point.cc), so they are tested without running LibTorch.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "supervisor/bench/bench.h"

namespace corepool {

struct PointSummary {
  SweepPoint point;
  int runs = 0;
  double segments = 0;
  double seconds = 0, seconds_min = 0, seconds_max = 0, spread = 0;  // processing time; spread = (max-min)/median
  double rate = 0;         // segments per second (median)
  double x_real_time = 0;  // seconds of audio per second
  double p50_ms = 0, p95_ms = 0, p99_ms = 0;
  double cpu_util = 0;     // share of the usable cpus, 0..1
  double voluntary = 0, involuntary = 0;  // context switches per run
  double rss_peak_mb = 0, rss_avg_mb = 0, pss_peak_mb = 0, pss_avg_mb = 0;
  nlohmann::json memory;   // [[seconds, rss_kb, pss_kb], ...] of the median run
  nlohmann::json jemalloc; // {"allocated": bytes, ...} of the point's own process, median run; {} on glibc
};

// Medians over `runs` (each a point's JSON); `hop_seconds` turns segments into audio.
PointSummary summarize(const SweepPoint& point, const std::vector<nlohmann::json>& runs, double hop_seconds);

// What each latency figure times, by kind.
std::string latency_meaning(const std::string& kind);

// Reads back what write_json wrote (for --replot); fills `host`.
std::vector<PointSummary> read_json(const std::string& path, nlohmann::json* host);

void write_csv(const std::string& path, const std::vector<PointSummary>& points);
void write_json(const std::string& path, const nlohmann::json& host, const std::vector<PointSummary>& points,
                const std::vector<std::string>& verdict);

// Plain-words findings: each ratio names its reference.
std::vector<std::string> verdict(const std::vector<PointSummary>& points, int usable_cpus);

// Writes DIR/<name>.gp and renders DIR/<name>.png with gnuplot for every plot
// the points allow. Returns the PNG paths; throws with gnuplot's complaint if
// it fails, or if gnuplot is not installed.
std::vector<std::string> write_plots(const std::string& dir, const std::vector<PointSummary>& points,
                                     double audio_seconds, int usable_cpus);

// The table printed at the end of a sweep.
void print_summary_table(const std::vector<PointSummary>& points);

}  // namespace corepool
