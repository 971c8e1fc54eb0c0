// Synthesized music for the tagger's training, test and demo audio: a melody,
// chords, an optional bass line and drums in one random key, scale and tempo,
// each note an instrument (additive, plucked, FM or reed-like) with an ADSR
// envelope. Deterministic in the Rng's state. Called by tools/sound_classes.cc.
#pragma once

#include <vector>

#include "tools/rng.h"

namespace corepool::synth {

// `seconds` of music at `rate`, peak-normalised to 0.9.
std::vector<float> music(Rng& rng, double seconds, int rate);

}  // namespace corepool::synth
