// What engine.optimize = bf16 costs in answers, measured once for `corepool
// bench --bf16-agreement` and `corepool doctor`'s bf16 line: the model loaded
// twice, optimized as onednn (fp32) and as bf16, both scoring the same items.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace corepool {

struct Agreement {
  uint64_t segments = 0;
  uint64_t labels = 0, equal = 0;  // thresholded labels, per segment per label
  double max_diff = 0;             // max |bf16 score - fp32 score|
  double share() const { return labels ? double(equal) / labels : 0.0; }
};

struct Bf16Agreement {
  bool tagger = false;  // the model follows the default tagger's contract: held_out was measured
  Agreement held_out;   // the held-out set tests/engine/tagger_test.cc uses (voices, seed 77)
  Agreement demo;       // the demo audio (corepool-gen-audio --demo), cut as the pipeline cuts it
  uint64_t planned = 0;  // segments the two sets hold
  bool cut_short() const { return held_out.segments + demo.segments < planned; }
};

// Throws when the model does not load, bf16 cannot be applied to it, or the
// audio cannot be synthesized (the held-out speech needs espeak-ng). With a
// `deadline`, stops after the batch of 16 that passes it (doctor: on a CPU
// that emulates bf16, CNN10 costs about 0.6 s per segment, and the full sets
// would take minutes); cut_short() then says so.
Bf16Agreement measure_bf16_agreement(const std::string& dir,
                                     std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

}  // namespace corepool
