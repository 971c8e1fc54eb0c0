// The JSON form of a tagging result, shared by `corepool batch` (one line per
// event) and `POST /v1/audio:tag` (an array), so that both say the same thing
// to the same precision: times to the millisecond, scores to 1e-4.
#pragma once

#include <cmath>

#include <nlohmann/json.hpp>

#include "audio/events.h"

namespace corepool {

inline double rounded(double v, double scale) { return std::round(v * scale) / scale; }

inline nlohmann::json event_json(const Event& e) {
  return {{"start", rounded(e.start, 1e3)}, {"end", rounded(e.end, 1e3)}, {"label", e.label},
          {"score", rounded(e.score, 1e4)}};
}

}  // namespace corepool
