// Lookups over a sweep's summaries for the verdict and the plots. Linear
// scans: a sweep has at most a few hundred points.
#include "supervisor/bench/bench_queries.h"

#include <algorithm>
#include <cstdio>

namespace corepool::bench {

std::string format(const char* fmt, double a, double b, double c) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

std::vector<const PointSummary*> series(const std::vector<PointSummary>& points, const Filter& keep) {
  std::vector<const PointSummary*> out;
  for (const auto& p : points) {
    if (keep(p)) out.push_back(&p);
  }
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->point.workers < b->point.workers; });
  return out;
}

const PointSummary* find_point(const std::vector<PointSummary>& points, const std::string& kind, int workers,
                               int intra, const std::string& allocator) {
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

}  // namespace corepool::bench
