// Formats one batch output line for a terminal; see timeline.h.
#include "supervisor/batch/timeline.h"

#include <cstdio>

namespace corepool {

std::string timeline_line(const nlohmann::json& line) {
  const std::string file = line.value("file", "");
  char buf[512];
  if (line.contains("summary")) {
    const nlohmann::json& s = line["summary"];
    std::snprintf(buf, sizeof(buf), "%s  %.1f s of audio: %llu segments, %llu events, %.2f s (%.0fx real time)",
                  file.c_str(), s.value("duration", 0.0), s.value("segments", 0ULL), s.value("events", 0ULL),
                  s.value("wall_seconds", 0.0), s.value("x_realtime", 0.0));
    if (s.contains("skipped")) {
      const std::string done = buf;
      std::snprintf(buf, sizeof(buf), "%s; %.2f s undecodable (see the warning)", done.c_str(),
                    s["skipped"].value("seconds", 0.0));
    }
  } else {
    std::snprintf(buf, sizeof(buf), "%s  %6.1f - %6.1f s  %-8s %.2f", file.c_str(), line.value("start", 0.0),
                  line.value("end", 0.0), line.value("label", "").c_str(), line.value("score", 0.0));
  }
  return buf;
}

}  // namespace corepool
