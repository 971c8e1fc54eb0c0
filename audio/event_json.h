// The JSON form of a tagging result, shared by `corepool batch` (one line per
// event) and `POST /v1/audio:tag` (an array), so that both say the same thing
// to the same precision: times to the millisecond, scores to 1e-4. Also what
// decoding skipped (AudioStream::skipped()), as JSON and as one readable line.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "audio/audio_decoder.h"
#include "audio/events.h"

namespace corepool {

inline double rounded(double v, double scale) { return std::round(v * scale) / scale; }

inline nlohmann::json event_json(const Event& e) {
  return {{"start", rounded(e.start, 1e3)}, {"end", rounded(e.end, 1e3)}, {"label", e.label},
          {"score", rounded(e.score, 1e4)}};
}

// {"seconds": 0.288, "at": [29.99]}: how much audio could not be decoded, and
// where (read as silence in the middle; a refused last packet is dropped).
inline nlohmann::json skipped_json(const std::vector<SkippedStretch>& skipped) {
  double total = 0;
  nlohmann::json at = nlohmann::json::array();
  for (const auto& s : skipped) {
    total += s.seconds;
    at.push_back(rounded(s.at_seconds, 1e3));
  }
  return {{"seconds", rounded(total, 1e3)}, {"at", at}};
}

// "undecodable, read as silence: 0.29 s at t = 29.99 s, 2.04 s at t = 41.20 s",
// then, if the last packet was refused, "; undecodable last packet at t =
// 3.44 s, dropped".
inline std::string skipped_text(const std::vector<SkippedStretch>& skipped) {
  std::string middle, end;
  char item[96];
  for (const SkippedStretch& s : skipped) {
    if (s.at_end) {
      std::snprintf(item, sizeof(item), "undecodable last packet at t = %.2f s, dropped", s.at_seconds);
      end = item;
      continue;
    }
    std::snprintf(item, sizeof(item), "%s %.2f s at t = %.2f s", middle.empty() ? "" : ",", s.seconds,
                  s.at_seconds);
    middle += item;
  }
  if (!middle.empty()) middle = "undecodable, read as silence:" + middle;
  return middle.empty() ? end : end.empty() ? middle : middle + "; " + end;
}

}  // namespace corepool
