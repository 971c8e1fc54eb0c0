// The four sound classes of the default tagger (speech, music, noise, silence),
// synthesized from a seed: speech from espeak-ng, music as notes and chords with
// envelopes and rhythm, coloured noise, silence and near-silence; plus the
// augmentation (gain, filtering, background mixing, clipping) that keeps a model
// from learning the synthesizer. Used by the trainer (models/train), the
// tagger's accuracy tests and the `make run` demo; never by the service.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/rng.h"

namespace corepool::synth {

enum class Label { kSpeech = 0, kMusic = 1, kNoise = 2, kSilence = 3 };
constexpr int kLabelCount = 4;
const char* label_name(Label label);  // "speech", "music", "noise", "silence"

// kHeldOut differs from kTrain in everything but the augmentation: speech in
// espeak-ng languages and voices, music in instruments, scales, tempi and
// meter (tools/music_synth.h), noise and silence in colours and textures; and
// in the seeds the caller passes. kHeldOutVoices holds out only the voices:
// its music, noise and silence are training's generators with other seeds
// (the trainer's held-out figures and the demo use it).
enum class Split { kTrain, kHeldOut, kHeldOutVoices };

// At least `seconds` of one class at `rate`, before augmentation. Speech may run
// a little longer (whole utterances). Throws std::runtime_error if espeak-ng fails.
std::vector<float> generate(Label label, Rng& rng, Split split, double seconds, int rate);

// In place: random EQ, level, background noise and clipping for speech, music
// and noise; silence keeps its level (that is what makes it silence).
void augment(Label label, Rng& rng, std::vector<float>& samples, int rate);

struct LabeledSegment {
  std::vector<float> samples;  // segment_seconds * rate samples
  Label label = Label::kSilence;
};

// `per_class` segments of each label, cut at random offsets from augmented
// recordings; speech segments are at least half voiced. Deterministic in
// (split, seed). About 10 % of segments end in zeros, as a file's padded tail does.
std::vector<LabeledSegment> labeled_segments(Split split, uint64_t seed, int per_class, int rate,
                                             double segment_seconds);

// The demo timeline of `make run`, from Split::kHeldOutVoices and its own seed.
struct DemoPart {
  Label label;
  double start = 0;  // seconds
  double end = 0;
};
std::vector<DemoPart> demo_parts();  // speech 0-8 s, music 8-16, noise 16-22, silence 22-28
std::vector<float> demo_samples(int rate);

}  // namespace corepool::synth
