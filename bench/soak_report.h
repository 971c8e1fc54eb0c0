// What the soak benchmark prints and writes once every run is done: the
// per-run tables and the jemalloc/glibc ratios (Markdown, on stdout), one CSV
// time series per run plus a summary CSV, and soak-memory.png through gnuplot.
#pragma once

#include <string>
#include <vector>

#include "bench/soak_sampler.h"

namespace soak {

struct RunResult {
  int repeat = 0;
  std::string mode;       // "thread" | "process"
  std::string allocator;  // "jemalloc" | "system"
  std::string conf;       // MALLOC_CONF the server was executed with, as shown in the tables
  double ready_ms = 0, wall_s = 0, audio_s = 0;
  long requests = 0;
  int workers = 0;
  int bg_threads_supervisor = 0, bg_threads_workers = 0;  // jemalloc_bg_thd threads at the end of the load
  double restarts = 0;           // corepool_worker_restarts_total
  double min_worker_busy_s = 0;  // the least busy worker's busy seconds: > 0 when every worker served
  std::vector<Sample> series;

  std::string label() const;  // "glibc", or "jemalloc CONF"
  double x_realtime() const { return wall_s > 0 ? audio_s / wall_s : 0; }
};

void print_tables(const std::vector<RunResult>& runs);
// Writes DIR/soak-summary.csv and DIR/soak-<n>-<mode>-<allocator>.csv; returns the latter, in run order.
std::vector<std::string> write_csv(const std::string& dir, const std::vector<RunResult>& runs);
// Writes DIR/soak-memory.gp and runs gnuplot on it; returns the PNG's path.
// Throws std::runtime_error when gnuplot fails.
std::string plot(const std::string& dir, const std::vector<RunResult>& runs, const std::vector<std::string>& csv);

}  // namespace soak
