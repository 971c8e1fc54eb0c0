// Labelled log-mel segments of real recordings for the tagger: the files that
// models/data/fetch-sources.sh listed in DEST/manifest.tsv, decoded and cut by
// the pipeline's own AudioStream and Segmenter, so that training sees exactly
// what `corepool batch` will feed the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "models/train/tagger_data.h"

namespace corepool::train {

// Which files of the manifest a set is made of. Files of the "train" split
// are divided once more by a hash of their path: one in ten is kValidation,
// which the trainer watches and never trains on. "held-out" files are never
// read by the trainer at all (models/data/judge.py scores them).
enum class RealSplit { kTrain, kValidation };

struct RealOptions {
  int per_class = 4000;       // at most this many segments per label, shared among packages (real_clips.cc)
  int per_file = 16;          // at most this many segments of one file (long music tracks)
  bool shift_short = true;    // a recording shorter than a segment also goes in at a random offset
  bool variants = true;       // each recording but silence also as another speaker / player / room
  double codec_share = 0.3;   // of those variants, this share also through a lossy codec (codec_roundtrip.h)
  uint64_t seed = 1;
};

// Reads DEST/manifest.tsv and decodes each file of the split. A file goes in
// as recorded and, unless it is silence, once more as another speaker, player
// or room: played 0.82-1.22 times as fast, a third of the time through a
// telephone band, then synth::augment's microphone colour, level, background
// noise and clipping, and for codec_share of them a lossy codec (Opus, MP3 or
// AAC at 12-64 kb/s). Each version gets one random gain that puts its loudest
// segment between -35 and -12 dBFS (silence keeps its level). A segment then
// under -62 dBFS is silence whatever the file's label; one whose clean audio
// is more than 30 dB under the file's loudest is a pause and is left out; the
// rest take the file's label. Files that fail to decode are named on stderr
// and skipped. Throws std::runtime_error if the manifest is missing.
// How many segments each source gives to a label's budget of `budget`, from
// how many each has (`sizes`): by the square root of its size, a source with
// less than its share giving all it has and the rest shared again. The sum is
// min(budget, sum of sizes).
std::vector<size_t> source_quotas(const std::vector<size_t>& sizes, size_t budget);

Dataset real_dataset(const ModelConfig& cfg, const std::string& dest, RealSplit split, const RealOptions& options);

}  // namespace corepool::train
