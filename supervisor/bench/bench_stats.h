// Order statistics for benchmark figures. Percentiles use the nearest rank on
// the sorted values (no interpolation: every latency figure is one that was
// measured); the median of an even count of repeats is the mean of the middle two.
// Also the figures' stopwatch (ms_since).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>
#include <vector>

namespace corepool {

// Milliseconds on the steady clock since `t`.
inline double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// q in [0, 1]; 0 for an empty set.
inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * v.size()));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// The middle value; with an even count, the mean of the two middle ones (so
// that two repeats give their mean, not the smaller one).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

// (max - min) / median: how far the repeats of one point disagree.
inline double spread(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  const double m = median(v);
  return m > 0 ? (*hi - *lo) / m : 0.0;
}

// Slope of the least-squares line through (x, y) points; 0 unless at least two
// x differ.
inline double least_squares_slope(const std::vector<std::pair<double, double>>& points) {
  if (points.empty()) return 0.0;
  double sx = 0, sy = 0;
  for (const auto& [x, y] : points) {
    sx += x;
    sy += y;
  }
  const double mx = sx / points.size(), my = sy / points.size();
  double sxy = 0, sxx = 0;
  for (const auto& [x, y] : points) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) * (x - mx);
  }
  return sxx > 0 ? sxy / sxx : 0.0;
}

}  // namespace corepool
