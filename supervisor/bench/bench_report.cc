// The pictures follow the field's own (the LibTorch audio engine write-up):
// processing time and CPU use against engine threads, one line per intra-op
// setting; memory over time per allocator; and our own comparison of the two
// modes with the bare ceilings. Each .gp script is kept next to its PNG with
// the data inline, so that a plot can be restyled without re-running.
#include "supervisor/bench/bench_report.h"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "supervisor/bench/bench_stats.h"

namespace corepool {
namespace {

using nlohmann::json;
using Filter = std::function<bool(const PointSummary&)>;

std::vector<double> field(const std::vector<json>& runs, const std::function<double(const json&)>& get) {
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(get(r));
  return v;
}

std::string format(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

// The points of one line of a plot, in order of workers.
std::vector<const PointSummary*> series(const std::vector<PointSummary>& points, const Filter& keep) {
  std::vector<const PointSummary*> out;
  for (const auto& p : points) {
    if (keep(p)) out.push_back(&p);
  }
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->point.workers < b->point.workers; });
  return out;
}

const PointSummary* find(const std::vector<PointSummary>& points, const std::string& kind, int workers, int intra,
                         const std::string& allocator) {
  for (const auto& p : points) {
    const auto& q = p.point;
    if (q.kind == kind && q.workers == workers && q.intra_op == intra && q.allocator == allocator) return &p;
  }
  return nullptr;
}

std::string main_allocator(const std::vector<PointSummary>& points) {
  for (const auto& p : points) {
    if (p.point.allocator == "jemalloc") return "jemalloc";
  }
  return points.empty() ? "jemalloc" : points.front().point.allocator;
}

// The worker count the verdict talks about: the usable cpus if measured, else the nearest below.
int reference_workers(const std::vector<PointSummary>& points, int usable) {
  int best = 0;
  for (const auto& p : points) {
    if (p.point.workers <= usable) best = std::max(best, p.point.workers);
  }
  return best > 0 ? best : usable;
}

int max_workers(const std::vector<PointSummary>& points) {
  int m = 0;
  for (const auto& p : points) m = std::max(m, p.point.workers);
  return m;
}

std::vector<int> intra_settings(const std::vector<PointSummary>& points, const std::string& kind) {
  std::vector<int> out;
  for (const auto& p : points) {
    if (p.point.kind == kind && std::find(out.begin(), out.end(), p.point.intra_op) == out.end()) {
      out.push_back(p.point.intra_op);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

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
    const bool missing = WIFEXITED(status) && WEXITSTATUS(status) == 127;
    throw std::runtime_error(missing ? "bench: gnuplot not found (apt-get install gnuplot-nox)"
                                     : "bench: gnuplot failed on " + script + ": " + out);
  }
}

// The thread-mode lines of the field's figures: one per intra-op setting,
// LibTorch's defaults, and process mode for comparison.
std::vector<Line> engine_lines(const std::vector<PointSummary>& points, const std::string& allocator) {
  std::vector<Line> lines;
  const std::string err = "using 1:2:3:4 with yerrorlines lw 2 pt 7";
  for (int intra : intra_settings(points, "thread")) {
    lines.push_back({"thread mode, intra-op " + std::to_string(intra), series(points, [&](const PointSummary& p) {
                       return p.point.kind == "thread" && p.point.intra_op == intra && p.point.allocator == allocator;
                     }), err});
  }
  lines.push_back({"LibTorch defaults (global pools)", series(points, [&](const PointSummary& p) {
                     return p.point.kind == "defaults" && p.point.allocator == allocator;
                   }), err});
  for (int intra : intra_settings(points, "process")) {
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

}  // namespace

std::string SweepPoint::label() const {
  const std::string intra = intra_op == 0 ? "default" : std::to_string(intra_op);
  return kind + " w" + std::to_string(workers) + " intra " + intra + " " + allocator;
}

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
    }
  }
  return s;
}

std::string latency_meaning(const std::string& kind) {
  return kind.rfind("ceiling", 0) == 0 ? "forward() of one batch" : "one segment, submit to result";
}

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
      s.point = {p.at("kind"), p.at("workers"), p.at("intra_op"), p.at("allocator")};
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
         "jemalloc_resident_mb,jemalloc_mapped_mb\n";
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
    out << line << "\n";
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
                    {"jemalloc_bytes", p.jemalloc},
                    {"memory_over_time", {{"columns", {"seconds", "rss_kb", "pss_kb"}}, {"samples", p.memory}}}});
  }
  std::ofstream out(path);
  out << json{{"host", host}, {"points", list}, {"verdict", verdict}}.dump(1) << "\n";
  if (!out) throw std::runtime_error("bench: cannot write " + path);
}

std::vector<std::string> verdict(const std::vector<PointSummary>& points, int usable) {
  std::vector<std::string> out;
  const std::string alloc = main_allocator(points);
  const int n = reference_workers(points, usable);
  const int m = max_workers(points);
  auto at = [&](const std::string& kind, int w, int intra) { return find(points, kind, w, intra, alloc); };
  const auto *proc = at("process", n, 1), *thr = at("thread", n, 1);
  const auto *cp = at("ceiling-processes", n, 1), *ct = at("ceiling-threads", n, 1);
  if (proc && cp) out.push_back(format("process mode reaches %.2f of the bare process ceiling at %.0f worker(s)",
                                       proc->rate / cp->rate, n));
  if (thr && ct) out.push_back(format("thread mode reaches %.2f of the bare thread ceiling at %.0f engine thread(s)",
                                      thr->rate / ct->rate, n));
  if (proc && thr) out.push_back(format("at %.0f worker(s) process mode gives %.2fx the throughput of thread mode",
                                        n, proc->rate / thr->rate));
  const auto *d = find(points, "defaults", m, 0, alloc), *t1 = at("thread", m, 1);
  if (d && t1) {
    out.push_back(format("LibTorch defaults are %.2fx slower than thread mode with intra-op 1 at %.0f engine "
                         "threads", d->seconds / t1->seconds, m) +
                  format(" (%.2f s vs %.2f s)", d->seconds, t1->seconds));
  }
  // The field's finding: with shared global pools, more engine threads take longer.
  for (int intra : intra_settings(points, "thread")) {
    const auto *a = at("thread", 1, intra), *b = at("thread", m, intra);
    if (a && b) {
      out.push_back("thread mode, intra-op " + std::to_string(intra) +
                    format(": processing time %.2f s at 1 engine thread, %.2f s at %.0f", a->seconds, b->seconds, m));
    }
  }
  if (const auto* d1 = find(points, "defaults", 1, 0, alloc); d1 && d) {
    out.push_back(format("LibTorch defaults: processing time %.2f s at 1 engine thread, %.2f s at %.0f", d1->seconds,
                         d->seconds, m));
    if (const auto* t11 = at("thread", 1, 1)) {
      out.push_back(format("at 1 engine thread LibTorch defaults keep %.0f%% of the cpus busy for %.2fx the "
                           "processing time of intra-op 1, which keeps ", d1->cpu_util * 100, d1->seconds / t11->seconds) +
                    format("%.0f%% busy", t11->cpu_util * 100));
    }
  }
  // Bigger intra-op pools against intra-op 1, at the most engine threads measured.
  for (const char* kind : {"thread", "process"}) {
    const auto* base = at(kind, m, 1);
    for (int intra : intra_settings(points, kind)) {
      const auto* p = at(kind, m, intra);
      if (!base || !p || intra == 1) continue;
      out.push_back(std::string(kind) + " mode, intra-op " + std::to_string(intra) +
                    format(": %.2fx the processing time of intra-op 1 at %.0f ", p->seconds / base->seconds, m) +
                    (std::string(kind) == "thread" ? "engine threads" : "workers") +
                    format(" (%.2f s vs %.2f s), %.0f involuntary context switches vs ", p->seconds, base->seconds,
                           p->involuntary) + format("%.0f", base->involuntary));
    }
  }
  for (const char* kind : {"thread", "process"}) {
    const auto *j = find(points, kind, n, 1, "jemalloc"), *g = find(points, kind, n, 1, "system");
    if (j && g && g->pss_peak_mb > 0) {
      out.push_back(std::string(kind) + " mode, " + std::to_string(n) + " worker(s): " +
                    format("jemalloc peak memory (PSS) is %.2fx glibc's, average %.2fx; throughput %.2fx",
                           j->pss_peak_mb / g->pss_peak_mb, j->pss_avg_mb / g->pss_avg_mb, j->rate / g->rate));
    }
  }
  const PointSummary* best = nullptr;
  for (const auto& p : points) {
    if (p.point.kind.rfind("ceiling", 0) != 0 && (!best || p.rate > best->rate)) best = &p;
  }
  if (best) {
    out.push_back("best pipeline configuration: " + best->point.label() +
                  format(", %.1f segments/s (%.1fx real time)", best->rate, best->x_real_time));
  }
  return out;
}

std::vector<std::string> write_plots(const std::string& dir, const std::vector<PointSummary>& points,
                                     double audio_seconds, int usable) {
  const std::string alloc = main_allocator(points);
  const auto err_rows = [](double scale) {
    return [scale](const PointSummary& p) {
      return format("%.0f %.4f ", p.point.workers, p.seconds * scale) +
             format("%.4f %.4f", p.seconds_min * scale, p.seconds_max * scale);
    };
  };
  std::vector<Plot> plots;
  plots.push_back({"processing-time",
                   format("Processing time of %.0f s of audio vs engine threads (", audio_seconds) + alloc +
                       format(", %.0f usable cpus)", usable),
                   "engine threads / workers", "processing time (s), median with min-max of repeats",
                   engine_lines(points, alloc), err_rows(1.0)});
  std::vector<Line> cpu = engine_lines(points, alloc);
  for (auto& l : cpu) {
    l.style = "using 1:2 with linespoints lw 2 pt 7" + std::string(l.title.rfind("process", 0) == 0 ? " dt 2" : "");
  }
  plots.push_back({"cpu-utilization",
                   format("CPU utilization vs engine threads (%.0f usable cpus = 100%%)", usable),
                   "engine threads / workers", "CPU utilization (% of usable cpus)", cpu,
                   [](const PointSummary& p) { return format("%.0f %.2f", p.point.workers, p.cpu_util * 100); }, "105"});
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
  plots.push_back({"throughput", "Throughput: process vs thread mode vs the bare ceilings (intra-op 1, " + alloc + ")",
                   "engine threads / workers", "segments per second (median)", tp,
                   [](const PointSummary& p) { return format("%.0f %.2f", p.point.workers, p.rate); }});
  std::vector<std::string> written;
  for (auto& plot : plots) {
    plot.lines.erase(std::remove_if(plot.lines.begin(), plot.lines.end(),
                                    [](const Line& l) { return l.points.empty(); }), plot.lines.end());
    if (plot.lines.empty()) continue;
    write_plot_script(dir, plot);
    run_gnuplot(dir + "/" + plot.name + ".gp");
    written.push_back(dir + "/" + plot.name + ".png");
  }
  // Memory over time: one line per mode and allocator at the reference worker count.
  const int n = reference_workers(points, usable);
  std::ofstream gp(dir + "/memory-over-time.gp");
  std::vector<std::pair<std::string, std::string>> blocks;
  for (const char* kind : {"thread", "process"}) {
    for (const char* a : {"jemalloc", "system"}) {
      const auto* p = find(points, kind, n, 1, a);
      if (!p || p->memory.empty()) continue;
      blocks.push_back({std::string(kind) + " mode, " + (std::string(a) == "system" ? "glibc malloc" : a),
                        memory_rows(*p)});
    }
  }
  if (blocks.empty()) return written;
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
  gp.close();
  run_gnuplot(dir + "/memory-over-time.gp");
  written.push_back(dir + "/memory-over-time.png");
  return written;
}

void print_summary_table(const std::vector<PointSummary>& points) {
  std::printf("\n%-17s %3s %5s %-8s %8s %6s %9s %7s %8s %8s %8s %5s %9s %9s %8s %8s\n", "kind", "w", "intra",
              "alloc", "time s", "spread", "seg/s", "x-rt", "p50 ms", "p95 ms", "p99 ms", "cpu%", "vol cs",
              "invol cs", "PSS pk", "PSS avg");
  for (const auto& p : points) {
    const std::string intra = p.point.intra_op == 0 ? "dflt" : std::to_string(p.point.intra_op);
    std::printf("%-17s %3d %5s %-8s %8.2f %5.1f%% %9.1f %7.1f %8.1f %8.1f %8.1f %5.0f %9.0f %9.0f %8.0f %8.0f\n",
                p.point.kind.c_str(), p.point.workers, intra.c_str(), p.point.allocator.c_str(), p.seconds,
                p.spread * 100, p.rate, p.x_real_time, p.p50_ms, p.p95_ms, p.p99_ms, p.cpu_util * 100, p.voluntary,
                p.involuntary, p.pss_peak_mb, p.pss_avg_mb);
  }
}

}  // namespace corepool
