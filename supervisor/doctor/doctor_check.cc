// Formatting of doctor lines. The name column is padded so that a terminal
// shows a table, yet every line stays "VERDICT NAME FOUND [fix: FIX]" for grep.
#include "supervisor/doctor/doctor_check.h"

#include <algorithm>
#include <cstdio>

namespace corepool {

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kOk:
      return "OK";
    case Verdict::kWarn:
      return "WARN";
    case Verdict::kFail:
      return "FAIL";
  }
  return "FAIL";
}

Verdict worst_verdict(const std::vector<CheckResult>& results) {
  Verdict worst = Verdict::kOk;
  for (const auto& r : results) worst = std::max(worst, r.verdict);
  return worst;
}

std::string format_check(const CheckResult& result) {
  char head[64];
  std::snprintf(head, sizeof head, "%-4s  %-20s ", verdict_name(result.verdict), result.name.c_str());
  std::string line = head + result.found;
  if (!result.fix.empty()) line += "  fix: " + result.fix;
  // One line per check, whatever a library put into its message.
  std::replace(line.begin(), line.end(), '\n', ' ');
  return line;
}

std::string human_bytes(uint64_t bytes) {
  const double mb = static_cast<double>(bytes) / (1024.0 * 1024.0);
  char text[32];
  if (mb >= 10240) {
    std::snprintf(text, sizeof text, "%.1f GB", mb / 1024.0);
  } else {
    std::snprintf(text, sizeof text, "%.1f MB", mb);
  }
  return text;
}

}  // namespace corepool
