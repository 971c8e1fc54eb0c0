// A field of this process's /proc/self/status, for the tests that bound how
// much memory streaming costs (VmRSS now, VmHWM the peak since the last reset
// through /proc/self/clear_refs).
#pragma once

#include <fstream>
#include <string>

namespace corepool::testing {

// The field's value in kB, e.g. status_kb("VmRSS"); -1 when absent.
inline long status_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

// Resets VmHWM to the current VmRSS (clear_refs "5"), so that the next
// status_kb("VmHWM") is the peak of what ran since.
inline void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

}  // namespace corepool::testing
