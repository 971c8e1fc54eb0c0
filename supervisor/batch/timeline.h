// `corepool batch --format timeline`: the same lines batch writes as JSON (an
// event, or a file's summary), as one human-readable line each, for people
// reading a terminal (`make run`). Files on disk always stay JSON Lines.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace corepool {

// {"file","start","end","label","score"} -> "demo.wav    0.0 -   8.5 s  speech   0.99";
// {"file","summary":{...}} -> "demo.wav  30.0 s of audio: 59 segments, 4 events, 0.5 s (58x real time)".
std::string timeline_line(const nlohmann::json& line);

}  // namespace corepool
