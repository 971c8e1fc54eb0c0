// Labelled log-mel tensors for the tagger, made from synthesized segments
// (tools/sound_classes.h) by the pipeline's own FeatureExtractor, and the
// scoring the trainer and the accuracy tests share: a segment counts as right
// when the labels at or above their thresholds are exactly its true label.
#pragma once

#include <string>

#include <torch/script.h>

#include "config/model_config.h"
#include "tools/sound_classes.h"

namespace corepool::train {

struct Dataset {
  torch::Tensor x;  // [N, 1, n_mels, frames]
  torch::Tensor y;  // [N] label index (int64)
};

// Reads a model.toml and checks it is a log-mel contract whose labels are
// speech, music, noise, silence in that order. Throws std::runtime_error naming the file.
ModelConfig tagger_contract(const std::string& model_toml);

// Synthesized segments of `split` (synth::labeled_segments). A share
// `codec_share` of them (0 for the sets that judge, so they stay what the
// tests pinned) goes through a lossy codec of training_codecs() first.
Dataset make_dataset(const ModelConfig& cfg, synth::Split split, uint64_t seed, int per_class,
                     double codec_share = 0.0);

// Scores of `net.forward` for every segment, batch by batch: [N, labels].
torch::Tensor scores(torch::jit::Module& net, const Dataset& data);

// Fraction of segments whose thresholded labels are exactly their true label.
double accuracy(torch::jit::Module& net, const Dataset& data, const ModelConfig& cfg);

// Prints rows = true label, columns = predicted (argmax) label, to stdout.
void print_confusion(torch::jit::Module& net, const Dataset& data, const ModelConfig& cfg);

}  // namespace corepool::train
