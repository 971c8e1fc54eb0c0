// Figures are MiB (2^20 bytes) from /proc's kB. In process mode "RSS" sums the
// supervisor's and the workers' resident sets, so pages they share (weights,
// libraries) count once per process. PSS splits shared pages, also with other
// programs that map the same libraries (LibTorch): on a shared machine it moves
// with their number. "heap" is the anonymous PSS (Pss_Anon), what malloc holds.
#include "bench/soak_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace soak {
namespace {

std::string allocator_name(const RunResult& r) { return r.allocator == "system" ? "glibc" : "jemalloc"; }

std::string mib(double v) { return std::isnan(v) ? "n/a" : fmt::format("{:.0f}", v); }

std::string percent(double ratio) { return std::isnan(ratio) ? "n/a" : fmt::format("{:+.1f} %", ratio * 100); }

struct RunFigures {
  Figures rss, pss, heap, sup_rss, sup_heap;
};

RunFigures figures(const RunResult& r) {
  return {figures_of(r.series, r.audio_s, &Sample::total_rss_kb), figures_of(r.series, r.audio_s, &Sample::total_pss_kb),
          figures_of(r.series, r.audio_s, &Sample::total_anon_kb), figures_of(r.series, r.audio_s, &Sample::sup_rss_kb),
          figures_of(r.series, r.audio_s, &Sample::sup_anon_kb)};
}

// peak | mean | baseline | last 10 % | growth | idle
std::string columns(const Figures& f) {
  return fmt::format("{:.0f} | {:.0f} | {} | {} | {} | {:.0f}", f.peak, f.mean, mib(f.baseline), mib(f.end),
                     percent(f.growth), f.idle);
}

void print_memory_tables(const std::vector<RunResult>& runs) {
  fmt::print("\n### RSS under load (MiB; thread mode: the one process, process mode: supervisor + workers)\n\n");
  fmt::print("| run | mode | allocator | MALLOC_CONF | requests | audio h | wall s | x RT | RSS peak | RSS mean "
             "| RSS baseline | RSS last 10 % | RSS growth | RSS idle |\n");
  fmt::print("|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResult& r = runs[i];
    fmt::print("| {} | {} | {} | {} | {} | {:.2f} | {:.0f} | {:.1f} | {} |\n", i + 1, r.mode, allocator_name(r), r.conf,
               r.requests, r.audio_s / 3600, r.wall_s, r.x_realtime(), columns(figures(r).rss));
  }
  fmt::print("\n### Heap (anonymous PSS) and PSS under load (MiB, same processes)\n\n");
  fmt::print("| run | mode | allocator | heap peak | heap mean | heap baseline | heap last 10 % | heap growth "
             "| heap idle | PSS peak | PSS mean |\n");
  fmt::print("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunFigures f = figures(runs[i]);
    fmt::print("| {} | {} | {} | {} | {:.0f} | {:.0f} |\n", i + 1, runs[i].mode, allocator_name(runs[i]),
               columns(f.heap), f.pss.peak, f.pss.mean);
  }
}

void print_process_table(const std::vector<RunResult>& runs) {
  fmt::print("\n### Supervisor alone, and the allocator in the processes (MiB)\n\n");
  fmt::print("| run | mode | allocator | sup RSS peak | sup RSS mean | sup RSS growth | sup heap mean | workers "
             "| jemalloc resident peak (sup) | jemalloc bg threads sup/workers | least busy worker s | restarts "
             "| READY ms |\n");
  fmt::print("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResult& r = runs[i];
    const RunFigures f = figures(r);
    const double resident = peak_of(r.series, &Sample::je_resident);
    fmt::print("| {} | {} | {} | {:.0f} | {:.0f} | {} | {:.0f} | {} | {} | {}/{} | {:.0f} | {:.0f} | {:.0f} |\n", i + 1,
               r.mode, allocator_name(r), f.sup_rss.peak, f.sup_rss.mean, percent(f.sup_rss.growth),
               f.sup_heap.mean, r.workers, resident < 0 ? std::string("-") : fmt::format("{:.0f}", resident),
               r.bg_threads_supervisor, r.bg_threads_workers, r.min_worker_busy_s, r.restarts, r.ready_ms);
  }
}

// Means over the repeats of one (mode, label).
struct Mean {
  double rss_peak = 0, rss_mean = 0, heap_peak = 0, heap_mean = 0, rss_growth = 0, heap_growth = 0, xrt = 0;
  int n = 0;
  void add(const RunResult& r) {
    const RunFigures f = figures(r);
    const double k = ++n;
    auto into = [k](double& mean, double v) { mean += (v - mean) / k; };
    into(rss_peak, f.rss.peak);
    into(rss_mean, f.rss.mean);
    into(heap_peak, f.heap.peak);
    into(heap_mean, f.heap.mean);
    into(rss_growth, f.rss.growth);
    into(heap_growth, f.heap.growth);
    into(xrt, r.x_realtime());
  }
};

template <typename T>
void add_unique(std::vector<T>& list, const T& item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

void print_ratio_table(const std::vector<RunResult>& runs) {
  std::vector<std::string> modes, jemalloc_labels;  // first-seen order
  std::map<std::pair<std::string, std::string>, Mean> means;
  for (const RunResult& r : runs) {
    add_unique(modes, r.mode);
    if (r.allocator == "jemalloc") add_unique(jemalloc_labels, r.label());
    means[{r.mode, r.label()}].add(r);
  }
  fmt::print("\n### jemalloc / glibc (means over repeats; < 1: jemalloc uses less)\n\n");
  fmt::print("| mode | jemalloc MALLOC_CONF | peak RSS | mean RSS | peak heap | mean heap | RSS growth jemalloc vs glibc "
             "| heap growth jemalloc vs glibc | x RT jemalloc / glibc |\n");
  fmt::print("|---|---|--:|--:|--:|--:|--:|--:|--:|\n");
  for (const auto& mode : modes) {
    const auto glibc = means.find({mode, "glibc"});
    if (glibc == means.end()) continue;
    const Mean& g = glibc->second;
    for (const auto& label : jemalloc_labels) {
      const auto found = means.find({mode, label});
      if (found == means.end()) continue;
      const Mean& j = found->second;
      fmt::print("| {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {} vs {} | {} vs {} | {:.2f} |\n", mode,
                 label.substr(label.find(' ') + 1), j.rss_peak / g.rss_peak, j.rss_mean / g.rss_mean,
                 j.heap_peak / g.heap_peak, j.heap_mean / g.heap_mean, percent(j.rss_growth), percent(g.rss_growth),
                 percent(j.heap_growth), percent(g.heap_growth), j.xrt / g.xrt);
    }
  }
}

std::string csv_quoted(const std::string& s) { return "\"" + s + "\""; }

void write_series(const std::string& path, const RunResult& r) {
  std::ofstream out(path);
  out << "# t_s,audio_h,audio_x_h,idle,sup_rss_mib,sup_pss_mib,sup_heap_mib,workers_rss_mib,workers_pss_mib,"
         "workers_heap_mib,total_rss_mib,total_pss_mib,total_heap_mib,workers,je_allocated_mib,je_active_mib,"
         "je_resident_mib,je_mapped_mib,je_retained_mib\n";
  auto kb = [](long v) { return fmt::format("{:.1f}", v / 1024.0); };
  auto stat = [](double bytes) { return bytes < 0 ? std::string("") : fmt::format("{:.1f}", bytes / 1048576); };
  for (const Sample& s : r.series) {
    out << fmt::format("{:.3f},{:.5f},{:.5f},{},", s.t_s, s.audio_s / 3600, s.audio_x_s / 3600, s.idle ? 1 : 0)
        << kb(s.sup_rss_kb) << ',' << kb(s.sup_pss_kb) << ',' << kb(s.sup_anon_kb) << ',' << kb(s.workers_rss_kb)
        << ',' << kb(s.workers_pss_kb) << ',' << kb(s.workers_anon_kb) << ',' << kb(s.total_rss_kb()) << ','
        << kb(s.total_pss_kb()) << ',' << kb(s.total_anon_kb()) << ',' << s.workers << ',' << stat(s.je_allocated)
        << ',' << stat(s.je_active) << ',' << stat(s.je_resident) << ',' << stat(s.je_mapped) << ','
        << stat(s.je_retained) << '\n';
  }
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

std::string RunResult::label() const { return allocator == "system" ? "glibc" : "jemalloc " + conf; }

void print_tables(const std::vector<RunResult>& runs) {
  print_memory_tables(runs);
  print_process_table(runs);
  print_ratio_table(runs);
  fmt::print("\nbaseline: mean over audio 10-20 % (after a warm-up of the first 10 %); last 10 %: mean over audio "
             "90-100 %; growth = last 10 % / baseline - 1; idle: the last sample after the idle window.\n");
}

std::vector<std::string> write_csv(const std::string& dir, const std::vector<RunResult>& runs) {
  std::vector<std::string> paths;
  std::ofstream summary(dir + "/soak-summary.csv");
  summary << "run,repeat,mode,allocator,malloc_conf,audio_h,wall_s,x_rt,rss_peak_mib,rss_mean_mib,rss_baseline_mib,"
             "rss_end_mib,rss_growth,rss_idle_mib,heap_peak_mib,heap_mean_mib,heap_baseline_mib,heap_end_mib,"
             "heap_growth,heap_idle_mib,pss_peak_mib,pss_mean_mib,sup_rss_peak_mib,sup_rss_mean_mib,sup_rss_growth,"
             "bg_threads_sup,bg_threads_workers,restarts\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResult& r = runs[i];
    const RunFigures f = figures(r);
    auto figs = [](const Figures& x) {
      return fmt::format("{:.1f},{:.1f},{:.1f},{:.1f},{:.4f},{:.1f}", x.peak, x.mean, x.baseline, x.end, x.growth,
                         x.idle);
    };
    summary << fmt::format("{},{},{},{},{},{:.4f},{:.1f},{:.2f},{},{},{:.1f},{:.1f},{:.1f},{:.1f},{:.4f},{},{},{}\n",
                           i + 1, r.repeat, r.mode, allocator_name(r), csv_quoted(r.conf), r.audio_s / 3600, r.wall_s,
                           r.x_realtime(), figs(f.rss), figs(f.heap), f.pss.peak, f.pss.mean, f.sup_rss.peak,
                           f.sup_rss.mean, f.sup_rss.growth, r.bg_threads_supervisor, r.bg_threads_workers,
                           r.restarts);
    paths.push_back(fmt::format("soak-{}-{}-{}.csv", i + 1, r.mode, allocator_name(r)));
    write_series(dir + "/" + paths.back(), r);
  }
  if (!summary) throw std::runtime_error("cannot write " + dir + "/soak-summary.csv");
  return paths;
}

}  // namespace soak
