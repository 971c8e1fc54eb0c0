// What engine.optimize = bf16 costs in answers, measured once for `corepool
// bench --bf16-agreement` and `corepool doctor`'s bf16 line: the model loaded
// twice, optimized as onednn (fp32) and as bf16, both scoring the same items.
#pragma once

#include <cstdint>
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
};

// Throws when the model does not load, bf16 cannot be applied to it, or the
// audio cannot be synthesized (the held-out speech needs espeak-ng).
Bf16Agreement measure_bf16_agreement(const std::string& dir);

}  // namespace corepool
