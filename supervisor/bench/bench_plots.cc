// The pictures follow the field's own (the LibTorch audio engine write-up):
// processing time and CPU use against engine threads, one line per intra-op
// setting; memory over time per allocator; and our own comparison of the two
// modes with the bare ceilings. Each .gp script is kept next to its PNG with
// the data inline, so that a plot can be restyled without re-running.
#include "supervisor/bench/bench_plots.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "supervisor/bench/bench_queries.h"

namespace corepool {
namespace {

using bench::find_point;
using bench::format;
using bench::series;

// The shell's "command not found" (popen runs gnuplot through sh).
constexpr int kShellCommandNotFound = 127;

// Eight colours that stay apart on white (no yellow).
constexpr const char* kStyle =
    "set terminal pngcairo size 960,600 enhanced font 'sans,11'\n"
    "set linetype 1 lc rgb '#1f77b4'\nset linetype 2 lc rgb '#d62728'\nset linetype 3 lc rgb '#2ca02c'\n"
    "set linetype 4 lc rgb '#ff7f0e'\nset linetype 5 lc rgb '#9467bd'\nset linetype 6 lc rgb '#8c564b'\n"
    "set linetype 7 lc rgb '#e377c2'\nset linetype 8 lc rgb '#17becf'\nset linetype cycle 8\n"
    "set key below\nset grid\n";

struct Line {
  std::string title;
  std::vector<const PointSummary*> points;
  std::string style;  // gnuplot "with ..." clause
};

struct Plot {
  std::string name, title, xlabel, ylabel;
  std::vector<Line> lines;
  std::function<std::string(const PointSummary&)> row;  // "x y [ylow yhigh]" for one point
  std::string ymax = "*";
};

void write_plot_script(const std::string& dir, const Plot& plot) {
  std::ofstream gp(dir + "/" + plot.name + ".gp");
  gp << kStyle << "set output '" << dir << "/" << plot.name << ".png'\n"
     << "set title \"" << plot.title << "\"\n"
     << "set xlabel \"" << plot.xlabel << "\"\nset ylabel \"" << plot.ylabel << "\"\n"
     << "set yrange [0:" << plot.ymax << "]\nset xtics 1\nset xrange [0.5:*]\n";
  for (size_t i = 0; i < plot.lines.size(); ++i) {
    gp << "$d" << i << " << EOD\n";
    for (const auto* p : plot.lines[i].points) gp << plot.row(*p) << "\n";
    gp << "EOD\n";
  }
  gp << "plot ";
  for (size_t i = 0; i < plot.lines.size(); ++i) {
    gp << (i ? ", \\\n     " : "") << "$d" << i << " " << plot.lines[i].style << " title \"" << plot.lines[i].title
       << "\"";
  }
  gp << "\n";
}

void run_gnuplot(const std::string& script) {
  const std::string cmd = "gnuplot '" + script + "' 2>&1";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("bench: cannot run gnuplot");
  std::string out;
  char buf[1024];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  if (status != 0) {
    const bool missing = WIFEXITED(status) && WEXITSTATUS(status) == kShellCommandNotFound;
    throw std::runtime_error(missing ? "bench: gnuplot not found (apt-get install gnuplot-nox)"
                                     : "bench: gnuplot failed on " + script + ": " + out);
  }
}

// The thread-mode lines of the field's figures: one per intra-op setting,
// LibTorch's defaults, and process mode for comparison.
std::vector<Line> engine_lines(const std::vector<PointSummary>& points, const std::string& allocator) {
  std::vector<Line> lines;
  const std::string err = "using 1:2:3:4 with yerrorlines lw 2 pt 7";
  for (int intra : bench::intra_settings(points, "thread")) {
    lines.push_back({"thread mode, intra-op " + std::to_string(intra), series(points, [&](const PointSummary& p) {
                       return p.point.kind == "thread" && p.point.intra_op == intra && p.point.allocator == allocator;
                     }), err});
  }
  lines.push_back({"LibTorch defaults (global pools)", series(points, [&](const PointSummary& p) {
                     return p.point.kind == "defaults" && p.point.allocator == allocator;
                   }), err});
  for (int intra : bench::intra_settings(points, "process")) {
    lines.push_back({"process mode, intra-op " + std::to_string(intra), series(points, [&](const PointSummary& p) {
                       return p.point.kind == "process" && p.point.intra_op == intra && p.point.allocator == allocator;
                     }), err + " dt 2"});
  }
  lines.erase(std::remove_if(lines.begin(), lines.end(), [](const Line& l) { return l.points.empty(); }), lines.end());
  return lines;
}

std::string memory_rows(const PointSummary& p) {
  std::ostringstream out;
  for (const auto& s : p.memory) out << s[0].get<double>() << " " << s[2].get<double>() / 1024.0 << "\n";
  return out.str();
}

// "x y ylow yhigh": processing time with the repeats' min and max, times `scale`.
std::function<std::string(const PointSummary&)> time_rows(double scale) {
  return [scale](const PointSummary& p) {
    return format("%.0f %.4f ", p.point.workers, p.seconds * scale) +
           format("%.4f %.4f", p.seconds_min * scale, p.seconds_max * scale);
  };
}

// Throughput at intra-op 1: both modes and both bare ceilings, one line each.
std::vector<Line> throughput_lines(const std::vector<PointSummary>& points, const std::string& alloc) {
  std::vector<Line> tp;
  for (const char* kind : {"ceiling-threads", "ceiling-processes", "thread", "process"}) {
    const std::string k = kind;
    auto pts = series(points, [&](const PointSummary& p) {
      return p.point.kind == k && p.point.intra_op == 1 && p.point.allocator == alloc;
    });
    const std::string title = k == "ceiling-threads" ? "bare ceiling, threads" : k == "ceiling-processes"
                                  ? "bare ceiling, processes" : k + " mode (full pipeline)";
    const std::string dash = k.rfind("ceiling", 0) == 0 ? " dt 2" : "";
    if (!pts.empty()) tp.push_back({title, pts, "using 1:2 with linespoints lw 2 pt 7" + dash});
  }
  return tp;
}

// The three plots over engine threads / workers, in the order they are drawn.
std::vector<Plot> worker_plots(const std::vector<PointSummary>& points, double audio_seconds, int usable) {
  const std::string alloc = bench::main_allocator(points);
  std::vector<Plot> plots;
  plots.push_back({"processing-time",
                   format("Processing time of %.0f s of audio vs engine threads (", audio_seconds) + alloc +
                       format(", %.0f usable cpus)", usable),
                   "engine threads / workers", "processing time (s), median with min-max of repeats",
                   engine_lines(points, alloc), time_rows(1.0)});
  std::vector<Line> cpu = engine_lines(points, alloc);
  for (auto& l : cpu) {
    l.style = "using 1:2 with linespoints lw 2 pt 7" + std::string(l.title.rfind("process", 0) == 0 ? " dt 2" : "");
  }
  plots.push_back({"cpu-utilization",
                   format("CPU utilization vs engine threads (%.0f usable cpus = 100%%)", usable),
                   "engine threads / workers", "CPU utilization (% of usable cpus)", cpu,
                   [](const PointSummary& p) { return format("%.0f %.2f", p.point.workers, p.cpu_util * 100); }, "105"});
  plots.push_back({"throughput", "Throughput: process vs thread mode vs the bare ceilings (intra-op 1, " + alloc + ")",
                   "engine threads / workers", "segments per second (median)", throughput_lines(points, alloc),
                   [](const PointSummary& p) { return format("%.0f %.2f", p.point.workers, p.rate); }});
  return plots;
}

// Memory over time: one line per mode and allocator at the reference worker
// count. Returns the script's path, or "" when no point has a memory series.
std::string write_memory_script(const std::string& dir, const std::vector<PointSummary>& points, int usable) {
  const int n = bench::reference_workers(points, usable);
  std::ofstream gp(dir + "/memory-over-time.gp");
  std::vector<std::pair<std::string, std::string>> blocks;
  for (const char* kind : {"thread", "process"}) {
    for (const char* a : {"jemalloc", "system"}) {
      const auto* p = find_point(points, kind, n, 1, a);
      if (!p || p->memory.empty()) continue;
      blocks.push_back({std::string(kind) + " mode, " + (std::string(a) == "system" ? "glibc malloc" : a),
                        memory_rows(*p)});
    }
  }
  if (blocks.empty()) return "";
  gp << kStyle << "set output '" << dir << "/memory-over-time.png'\n"
     << "set title \"Memory over one run (" << n << " workers, intra-op 1; start-up included)\"\n"
     << "set xlabel \"time since the point started (s)\"\nset ylabel \"PSS of the process and its workers (MB)\"\n"
     << "set yrange [0:*]\n";
  for (size_t i = 0; i < blocks.size(); ++i) gp << "$m" << i << " << EOD\n" << blocks[i].second << "EOD\n";
  gp << "plot ";
  for (size_t i = 0; i < blocks.size(); ++i) {
    gp << (i ? ", \\\n     " : "") << "$m" << i << " using 1:2 with lines lw 2" << (i % 2 ? " dt 2" : "")
       << " title \"" << blocks[i].first << "\"";
  }
  gp << "\n";
  return dir + "/memory-over-time.gp";
}

}  // namespace

std::vector<std::string> write_plots(const std::string& dir, const std::vector<PointSummary>& points,
                                     double audio_seconds, int usable) {
  std::vector<std::string> written;
  for (auto& plot : worker_plots(points, audio_seconds, usable)) {
    plot.lines.erase(std::remove_if(plot.lines.begin(), plot.lines.end(),
                                    [](const Line& l) { return l.points.empty(); }), plot.lines.end());
    if (plot.lines.empty()) continue;
    write_plot_script(dir, plot);
    run_gnuplot(dir + "/" + plot.name + ".gp");
    written.push_back(dir + "/" + plot.name + ".png");
  }
  const std::string memory = write_memory_script(dir, points, usable);
  if (memory.empty()) return written;
  run_gnuplot(memory);
  written.push_back(dir + "/memory-over-time.png");
  return written;
}

}  // namespace corepool
