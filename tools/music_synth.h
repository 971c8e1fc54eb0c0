// Synthesized music for the tagger's training, test and demo audio: a melody,
// chords, an optional bass line and drums in one random key, scale and tempo,
// each note an instrument (additive, plucked, FM or reed-like) with an ADSR
// envelope. The held-out set shares none of that with training: other
// instruments (bell, bowed, organ, mallet), other scales, tempi outside the
// training range, arpeggios in triple time, no drums. Deterministic in the
// Rng's state. Called by tools/sound_classes.cc.
#pragma once

#include <vector>

#include "tools/rng.h"

namespace corepool::synth {

enum class MusicSet { kTrain, kHeldOut };

// `seconds` of music at `rate`, peak-normalised to 0.9.
std::vector<float> music(Rng& rng, double seconds, int rate, MusicSet set = MusicSet::kTrain);

}  // namespace corepool::synth
