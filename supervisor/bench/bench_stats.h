// Order statistics for benchmark figures. Percentiles use the nearest rank on
// the sorted values (no interpolation: every latency figure is one that was
// measured); the median of an even count of repeats is the mean of the middle two.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace corepool {

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

}  // namespace corepool
