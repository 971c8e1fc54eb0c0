// Features are computed in chunks so that the PCM of a whole data set is never
// turned into one giant STFT at once; the tensors themselves are small
// (about 26 KB per segment).
#include "models/train/tagger_data.h"

#include <cstdio>
#include <stdexcept>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "models/train/codec_roundtrip.h"
#include "worker/features.h"

namespace corepool::train {
namespace {

constexpr int64_t kChunk = 128;

std::vector<bool> labels_on(const torch::Tensor& row, const ModelConfig& cfg) {
  std::vector<bool> on(cfg.labels.size());
  for (size_t l = 0; l < on.size(); ++l) on[l] = row[int64_t(l)].item<float>() >= cfg.thresholds[l];
  return on;
}

}  // namespace

ModelConfig tagger_contract(const std::string& model_toml) {
  ModelConfig cfg = load_model_config(model_toml);
  if (cfg.input != InputKind::kLogMel) throw std::runtime_error(model_toml + ": the tagger needs input = \"logmel\"");
  if (cfg.labels.size() != size_t(synth::kLabelCount)) {
    throw std::runtime_error(model_toml + ": the tagger needs exactly 4 labels");
  }
  for (int l = 0; l < synth::kLabelCount; ++l) {
    if (cfg.labels[size_t(l)] != synth::label_name(static_cast<synth::Label>(l))) {
      throw std::runtime_error(model_toml + ": labels must be [\"speech\", \"music\", \"noise\", \"silence\"]");
    }
  }
  return cfg;
}

Dataset make_dataset(const ModelConfig& cfg, synth::Split split, uint64_t seed, int per_class, double codec_share) {
  std::vector<synth::LabeledSegment> segments =
      synth::labeled_segments(split, seed, per_class, cfg.sample_rate, cfg.segment_seconds);
  if (codec_share > 0) {
    // Its own stream of choices: the segments themselves are unchanged.
    synth::Rng rng(seed ^ 0xc0dec);
    const std::vector<Codec>& codecs = training_codecs();
    for (synth::LabeledSegment& s : segments) {
      if (s.label == synth::Label::kSilence || !rng.chance(codec_share)) continue;
      s.samples = codec_roundtrip(s.samples, cfg.sample_rate, codecs[rng.index(codecs.size())]);
    }
  }
  FeatureExtractor fx(cfg);
  std::vector<torch::Tensor> chunks;
  std::vector<int64_t> labels;
  for (size_t at = 0; at < segments.size(); at += kChunk) {
    std::vector<const float*> ptrs;
    for (size_t i = at; i < std::min(segments.size(), at + kChunk); ++i) {
      ptrs.push_back(segments[i].samples.data());
      labels.push_back(int64_t(segments[i].label));
    }
    chunks.push_back(fx.compute(ptrs));
  }
  return {torch::cat(chunks), torch::tensor(labels, torch::kLong)};
}

torch::Tensor scores(torch::jit::Module& net, const Dataset& data) {
  c10::InferenceMode guard;
  std::vector<torch::Tensor> out;
  for (int64_t at = 0; at < data.x.size(0); at += kChunk) {
    out.push_back(net.forward({data.x.slice(0, at, std::min(at + kChunk, data.x.size(0)))}).toTensor());
  }
  return torch::cat(out);
}

double accuracy(torch::jit::Module& net, const Dataset& data, const ModelConfig& cfg) {
  const torch::Tensor s = scores(net, data);
  int64_t right = 0;
  for (int64_t i = 0; i < s.size(0); ++i) {
    const std::vector<bool> on = labels_on(s[i], cfg);
    const int64_t truth = data.y[i].item<int64_t>();
    bool exact = true;
    for (size_t l = 0; l < on.size(); ++l) exact = exact && on[l] == (int64_t(l) == truth);
    right += exact;
  }
  return s.size(0) ? double(right) / double(s.size(0)) : 0.0;
}

void print_confusion(torch::jit::Module& net, const Dataset& data, const ModelConfig& cfg) {
  const torch::Tensor predicted = scores(net, data).argmax(1);
  const size_t n = cfg.labels.size();
  std::vector<std::vector<int>> m(n, std::vector<int>(n, 0));
  for (int64_t i = 0; i < predicted.size(0); ++i) ++m[size_t(data.y[i].item<int64_t>())][size_t(predicted[i].item<int64_t>())];
  std::printf("%-10s", "truth\\said");
  for (const std::string& l : cfg.labels) std::printf("%9s", l.c_str());
  std::printf("\n");
  for (size_t t = 0; t < n; ++t) {
    std::printf("%-10s", cfg.labels[t].c_str());
    for (size_t p = 0; p < n; ++p) std::printf("%9d", m[t][p]);
    std::printf("\n");
  }
}

}  // namespace corepool::train
