// Every choice here is seeded from the options' seed and the file's path, not
// from the order files are read in, so a set is the same on every machine.
#include "models/train/real_clips.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <torch/torch.h>

#include "audio/audio_stream.h"
#include "audio/resampler.h"
#include "audio/segmenter.h"
#include "models/train/codec_roundtrip.h"
#include "tools/sound_classes.h"
#include "worker/features.h"

namespace corepool::train {
namespace {

struct ManifestRow {
  std::string path;  // relative to DEST
  std::string label;
  std::string split;
  std::string package;
};

// FNV-1a: a hash that is the same on every compiler and machine.
uint64_t stable_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::vector<ManifestRow> read_manifest(const std::string& dest, RealSplit split) {
  const std::string file = dest + "/manifest.tsv";
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file + ": not found (run models/data/fetch-sources.sh " + dest + ")");
  std::vector<ManifestRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    ManifestRow r;
    std::getline(fields, r.path, '\t'), std::getline(fields, r.label, '\t');
    std::getline(fields, r.split, '\t'), std::getline(fields, r.package, '\t');
    if (r.package.empty()) throw std::runtime_error(file + ": expected 4 tab-separated fields: " + line);
    if (r.split != "train") continue;  // held-out files are never read here
    const bool validation = stable_hash(r.path) % 10 == 0;
    if (validation == (split == RealSplit::kValidation)) rows.push_back(r);
  }
  return rows;
}

// The source a package's recordings share a budget as: one per package, but
// the languages of one voice product are one source (asterisk-core-sounds-en-wav,
// -es-wav ... are the same studio and microphone), so that they do not
// outweigh the sources with many speakers.
std::string source_of(const std::string& package) {
  static const std::regex language_pack("^(.*)-[a-z][a-z]-wav$");
  std::smatch m;
  return std::regex_match(package, m, language_pack) ? m[1].str() : package;
}

int label_index(const ModelConfig& cfg, const std::string& label) {
  for (size_t i = 0; i < cfg.labels.size(); ++i) {
    if (cfg.labels[i] == label) return int(i);
  }
  throw std::runtime_error("manifest label '" + label + "' is not one of the model's");
}

double rms_db(const std::vector<float>& x) {
  double sum = 0;
  for (float v : x) sum += double(v) * v;
  return 10 * std::log10(std::max(sum / double(std::max<size_t>(x.size(), 1)), 1e-20));
}

std::vector<float> decode_all(const std::string& path, const ModelConfig& cfg) {
  AudioStream stream(path, cfg.sample_rate);
  std::vector<float> out;
  while (stream.read(out)) {
  }
  return out;
}

// `x` as the pipeline cuts it: segments of `length` samples every `hop`, the
// tail zero-padded.
std::vector<std::vector<float>> cut(const std::vector<float>& x, const ModelConfig& cfg) {
  return cut_segments(x.data(), x.size(), size_t(cfg.segment_samples()), size_t(cfg.hop_samples()));
}

// `x` played `factor` times faster (linear interpolation): pitch and formants
// move together, as with a shorter or longer vocal tract or a detuned tape.
std::vector<float> played_at(const std::vector<float>& x, double factor) {
  std::vector<float> y(size_t(double(x.size()) / factor));
  for (size_t i = 0; i < y.size(); ++i) {
    const double at = double(i) * factor;
    const size_t j = std::min(size_t(at), x.size() - 1), k = std::min(j + 1, x.size() - 1);
    y[i] = float(x[j] + (at - double(j)) * (x[k] - x[j]));
  }
  return y;
}

// `x` through a telephone or an old recorder: down to `narrow` Hz and back,
// so nothing above narrow / 2 survives. Four of the five speech sources are
// telephone prompts at 8 kHz; without this, "no energy above 4 kHz" would
// mean speech to the model, and a full-band voice would be noise (the alsa
// channel names were, 7 of 8, before it).
std::vector<float> band_limited(const std::vector<float>& x, int rate, int narrow) {
  std::vector<float> low, back;
  Resampler down(rate, narrow), up(narrow, rate);
  down.process(x.data(), x.size(), true, low);
  up.process(low.data(), low.size(), true, back);
  back.resize(x.size(), 0.0f);
  return back;
}

// Segment indices of a recording: all, or `per_file` of them at random.
std::vector<size_t> pick(size_t n, int per_file, std::mt19937_64& rng) {
  std::vector<size_t> idx(n);
  for (size_t i = 0; i < n; ++i) idx[i] = i;
  if (int(n) > per_file) {
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(size_t(per_file));
  }
  return idx;
}

// A recording shorter than a segment is the whole of its file's one segment,
// at its start; it also goes in once at a random offset, so that where a short
// word or bang falls in the segment does not decide its label.
void add_shifted(std::vector<std::vector<float>>& segments, size_t length, std::mt19937_64& rng) {
  if (segments.size() != 1) return;
  size_t used = segments[0].size();
  while (used > 0 && segments[0][used - 1] == 0.0f) --used;
  if (used == 0 || used >= length * 3 / 4) return;
  std::vector<float> shifted(length, 0.0f);
  const size_t at = std::uniform_int_distribution<size_t>(1, length - used)(rng);
  std::copy(segments[0].begin(), segments[0].begin() + long(used), shifted.begin() + long(at));
  segments.push_back(std::move(shifted));
}

// One version of a recording into labelled segments (rules in real_clips.h).
// `clean` decides what is a pause; `heard` is what the model is given.
void label_version(const std::vector<float>& clean, const std::vector<float>& heard, int file_label, int silence,
                   const ModelConfig& cfg, const RealOptions& o, std::mt19937_64& rng,
                   std::vector<std::vector<float>>& segments, std::vector<int>& labels) {
  std::vector<std::vector<float>> ref = cut(clean, cfg), all = cut(heard, cfg);
  const size_t length = size_t(cfg.segment_samples());
  if (o.shift_short && all.size() == 1) {
    std::mt19937_64 same = rng;  // the same offset for both
    add_shifted(ref, length, same);
    add_shifted(all, length, rng);
  }
  double loudest_ref = -200, loudest = -200;
  for (size_t i = 0; i < all.size(); ++i) {
    loudest_ref = std::max(loudest_ref, rms_db(ref[i]));
    loudest = std::max(loudest, rms_db(all[i]));
  }
  const double gain_db = file_label == silence ? 0.0 : std::uniform_real_distribution<double>(-35, -12)(rng) - loudest;
  const float gain = float(std::pow(10.0, gain_db / 20));
  for (size_t i : pick(all.size(), o.per_file, rng)) {
    std::vector<float>& x = all[i];
    for (float& v : x) v = std::clamp(v * gain, -1.0f, 1.0f);
    int label = file_label;
    if (file_label != silence) {
      if (rms_db(x) < -62) {
        label = silence;
      } else if (rms_db(ref[i]) < loudest_ref - 30) {
        continue;  // a pause or a fade: neither the file's label nor silence
      }
    }
    segments.push_back(std::move(x));
    labels.push_back(label);
  }
}

// Labelled segments of one file: as recorded and, but for silence, once more
// as another speaker or player in another room.
// The file's draws are seeded from its path in the manifest, relative to
// `dest`: the same packages give the same model wherever they were unpacked
// (seeded from the full path, a retraining in another directory differed).
void label_file(const std::string& dest, const ManifestRow& row, const ModelConfig& cfg, const RealOptions& o,
                std::vector<std::vector<float>>& segments, std::vector<int>& labels) {
  const std::vector<float> clean = decode_all(dest + "/" + row.path, cfg);
  if (clean.empty()) return;
  std::mt19937_64 rng(o.seed ^ stable_hash(row.path));
  const int file_label = label_index(cfg, row.label), silence = label_index(cfg, "silence");
  label_version(clean, clean, file_label, silence, cfg, o, rng, segments, labels);
  if (o.variants && file_label != silence) {
    // Another speaker or player (another speed) in another room, through
    // another microphone (synth::augment: colour, level, background noise,
    // clipping). The sped-up clean recording still decides what is a pause.
    synth::Rng srng(rng());
    const std::vector<float> reference = played_at(clean, srng.uniform(0.82, 1.22));
    std::vector<float> heard = reference;
    if (srng.chance(0.35)) heard = band_limited(heard, cfg.sample_rate, srng.chance(0.6) ? 8000 : 11025);
    synth::augment(static_cast<synth::Label>(file_label), srng, heard, cfg.sample_rate);
    if (srng.chance(o.codec_share)) {  // then saved as people's files are: Opus, MP3, AAC
      const std::vector<Codec>& codecs = training_codecs();
      heard = codec_roundtrip(heard, cfg.sample_rate, codecs[srng.index(codecs.size())]);
    }
    label_version(reference, heard, file_label, silence, cfg, o, rng, segments, labels);
  }
}

}  // namespace

// Each source's share of the budget grows with the square root of what it
// has: the big ones still give most, the small ones are heard. A source with
// less than its share gives it all, and what it leaves goes to the others by
// the same rule, until the budget or every source is used up (before, what a
// small source left was lost: noise got 3,657 of its 4,000).
std::vector<size_t> source_quotas(const std::vector<size_t>& sizes, size_t budget) {
  std::vector<size_t> quota(sizes.size(), 0);
  for (;;) {
    size_t given = 0, left = budget;
    double weights = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      left -= std::min(left, quota[i]);
      if (quota[i] < sizes[i]) weights += std::sqrt(double(sizes[i]));
    }
    if (left == 0 || weights == 0) return quota;
    for (size_t i = 0; i < sizes.size() && given < left; ++i) {
      if (quota[i] >= sizes[i]) continue;
      const size_t share = std::max<size_t>(1, size_t(std::floor(std::sqrt(double(sizes[i])) / weights * double(left))));
      const size_t add = std::min({share, sizes[i] - quota[i], left - given});
      quota[i] += add;
      given += add;
    }
  }
}

namespace {

struct Pool {
  std::vector<torch::Tensor> features;  // [1, 1, n_mels, frames] each
};

}  // namespace

Dataset real_dataset(const ModelConfig& cfg, const std::string& dest, RealSplit split, const RealOptions& o) {
  const std::vector<ManifestRow> rows = read_manifest(dest, split);
  FeatureExtractor fx(cfg);
  // label -> source -> segments (source_of).
  std::map<int, std::map<std::string, Pool>> pools;
  int failed = 0;
  for (const ManifestRow& row : rows) {
    std::vector<std::vector<float>> segments;
    std::vector<int> labels;
    try {
      label_file(dest, row, cfg, o, segments, labels);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "real audio: skipped %s: %s\n", row.path.c_str(), e.what());
      ++failed;
      continue;
    }
    if (segments.empty()) continue;
    std::vector<const float*> ptrs;
    for (const auto& x : segments) ptrs.push_back(x.data());
    const torch::Tensor feats = fx.compute(ptrs);
    for (size_t i = 0; i < segments.size(); ++i) {
      pools[labels[i]][source_of(row.package)].features.push_back(feats.slice(0, int64_t(i), int64_t(i) + 1).clone());
    }
  }
  std::vector<torch::Tensor> xs;
  std::vector<int64_t> ys;
  std::mt19937_64 rng(o.seed);
  for (auto& [label, packages] : pools) {
    std::vector<size_t> sizes;
    for (auto& [name, pool] : packages) {
      std::shuffle(pool.features.begin(), pool.features.end(), rng);
      sizes.push_back(pool.features.size());
    }
    const std::vector<size_t> quota = source_quotas(sizes, size_t(o.per_class));
    size_t taken = 0, k = 0;
    for (auto& [name, pool] : packages) {
      for (size_t i = 0; i < quota[k]; ++i, ++taken) xs.push_back(pool.features[i]), ys.push_back(label);
      ++k;
    }
    std::printf("real audio: %-8s %5zu segments from %zu sources\n", cfg.labels[size_t(label)].c_str(), taken,
                packages.size());
  }
  if (failed) std::printf("real audio: %d files could not be decoded (named above)\n", failed);
  if (xs.empty()) throw std::runtime_error(dest + "/manifest.tsv: no segments for this split");
  return {torch::cat(xs), torch::tensor(ys, torch::kLong)};
}

}  // namespace corepool::train
