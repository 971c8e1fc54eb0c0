// Generators of the four classes and the augmentation between them and a model.
// Levels are in dBFS of RMS. The gap between the quietest noise (-45 dBFS) and
// the loudest near-silence (-62 dBFS) is what separates "noise" from "silence".
#include "tools/sound_classes.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tools/music_synth.h"
#include "tools/speech_synth.h"

namespace corepool::synth {
namespace {

double db_to_gain(double db) { return std::pow(10.0, db / 20.0); }

double rms(const std::vector<float>& x, size_t from = 0, size_t to = SIZE_MAX) {
  to = std::min(to, x.size());
  double sum = 0;
  for (size_t i = from; i < to; ++i) sum += double(x[i]) * x[i];
  return to > from ? std::sqrt(sum / double(to - from)) : 0.0;
}

void scale_to_rms(std::vector<float>& x, double target_db) {
  const double now = rms(x);
  if (now <= 0) return;
  const float g = float(db_to_gain(target_db) / now);
  for (float& s : x) s *= g;
}

// ---- speech -------------------------------------------------------------

// Languages and voice variants of espeak-ng; the held-out split uses none of the train ones.
struct VoiceSet {
  std::vector<std::string> languages, variants;
};
const VoiceSet& voices(Split split) {
  static const VoiceSet train{{"en", "de", "es", "it", "pl", "cs", "fi", "hu"},
                              {"", "m1", "m2", "m3", "m4", "m7", "f1", "f2", "f4", "klatt", "klatt3",
                               "adam", "andy", "annie", "benjamin", "david", "ed", "john", "linda",
                               "max", "michael", "paul", "rob", "steph", "travis", "zac", "croak"}};
  static const VoiceSet held_out{{"en-us", "fr", "pt", "nl", "sv", "ro"},
                                 {"m5", "m6", "m8", "f3", "f5", "klatt2", "klatt4", "Alicia",
                                  "belinda", "edward", "iven", "robert", "victor", "quincy"}};
  return split == Split::kTrain ? train : held_out;  // kHeldOut and kHeldOutVoices
}

// Pseudo-words that every Latin-script voice can pronounce by its own rules.
std::string random_text(Rng& rng, int words) {
  static const std::vector<std::string> onsets = {"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t",
                                                  "v", "z", "sh", "ch", "br", "tr", "st", "pl", "gr", "kl", ""};
  static const std::vector<std::string> vowels = {"a", "e", "i", "o", "u", "ai", "ou", "ee", "oa"};
  static const std::vector<std::string> codas = {"", "", "", "n", "r", "s", "t", "l", "m", "nd"};
  std::string text;
  for (int w = 0; w < words; ++w) {
    if (w) text += ' ';
    const int syllables = 1 + int(rng.index(3));
    for (int s = 0; s < syllables; ++s) text += rng.pick(onsets) + rng.pick(vowels) + rng.pick(codas);
  }
  return text + ".";
}

Voice random_voice(Rng& rng, Split split) {
  Voice v;
  v.language = rng.pick(voices(split).languages);
  v.variant = rng.pick(voices(split).variants);
  v.words_per_minute = 120 + int(rng.index(100));
  v.pitch = 20 + int(rng.index(60));
  v.word_gap_10ms = int(rng.index(3));
  return v;
}

// Drops the near-silent lead-in and tail that espeak-ng adds around an utterance.
void trim(std::vector<float>& x) {
  const auto loud = [](float s) { return std::fabs(s) > 2e-3f; };
  const auto first = std::find_if(x.begin(), x.end(), loud);
  const auto last = std::find_if(x.rbegin(), x.rend(), loud).base();
  x = first < last ? std::vector<float>(first, last) : std::vector<float>{};
}

std::vector<float> speech(Rng& rng, Split split, double seconds, int rate) {
  const Voice voice = random_voice(rng, split);  // one speaker per recording
  std::vector<float> out;
  while (double(out.size()) < seconds * rate) {
    std::vector<float> utterance = speak(random_text(rng, 6 + int(rng.index(10))), voice, rate);
    trim(utterance);
    if (utterance.empty()) throw std::runtime_error("espeak-ng produced only silence");
    if (!out.empty()) out.resize(out.size() + size_t(rng.uniform(0.05, 0.25) * rate), 0.0f);
    out.insert(out.end(), utterance.begin(), utterance.end());
  }
  return out;
}

// ---- noise and silence --------------------------------------------------

enum class Colour { kWhite, kPink, kBrown, kBand };

std::vector<float> coloured(Rng& rng, Colour colour, size_t n, int rate) {
  std::vector<float> x(n);
  double b0 = 0, b1 = 0, b2 = 0, brown = 0, lp = 0, hp_in = 0, hp = 0;
  const double lp_a = std::exp(-6.283 * rng.uniform(300, 4000) / rate);
  const double hp_a = std::exp(-6.283 * rng.uniform(100, 1500) / rate);
  for (size_t i = 0; i < n; ++i) {
    const double w = rng.normal();
    double s = w;
    switch (colour) {
      case Colour::kWhite: break;
      case Colour::kPink:  // Paul Kellet's economy filter: -3 dB/octave
        b0 = 0.99765 * b0 + w * 0.0990460;
        b1 = 0.96300 * b1 + w * 0.2965164;
        b2 = 0.57000 * b2 + w * 1.0526913;
        s = b0 + b1 + b2 + w * 0.1848;
        break;
      case Colour::kBrown: brown = 0.995 * brown + 0.1 * w; s = brown; break;
      case Colour::kBand:  // a one-pole low-pass, then a one-pole high-pass
        lp = lp_a * lp + (1 - lp_a) * w;
        hp = hp_a * (hp + lp - hp_in);
        hp_in = lp;
        s = hp;
        break;
    }
    x[i] = float(s);
  }
  return x;
}

// Held-out colours, none of them in training: violet (+6 dB/octave, a
// differentiated white), a narrow resonant band (a two-pole resonator: a
// whistle of wind, a hum of a duct), and a fan (brown rumble under the
// harmonics of a motor's hum).
enum class HeldOutColour { kViolet, kResonant, kFan };

std::vector<float> held_out_coloured(Rng& rng, HeldOutColour colour, size_t n, int rate) {
  std::vector<float> x(n);
  const double centre = rng.uniform(200, 3000), bandwidth = rng.uniform(50, 400);
  const double r = std::exp(-3.141593 * bandwidth / rate), c = 2 * r * std::cos(6.283185 * centre / rate);
  const double motor = rng.uniform(25, 60);
  double last = 0, y1 = 0, y2 = 0, brown = 0;
  for (size_t i = 0; i < n; ++i) {
    const double w = rng.normal();
    double s = 0;
    switch (colour) {
      case HeldOutColour::kViolet: s = w - last; last = w; break;
      case HeldOutColour::kResonant: s = w + c * y1 - r * r * y2; y2 = y1; y1 = s; break;
      case HeldOutColour::kFan: {
        brown = 0.995 * brown + 0.1 * w;
        double hum = 0;
        for (int k = 1; k <= 6; ++k) hum += std::sin(6.283185 * motor * k * double(i) / rate) / k;
        s = brown + 0.3 * hum;
        break;
      }
    }
    x[i] = float(s);
  }
  return x;
}

std::vector<float> held_out_noise(Rng& rng, double seconds, int rate) {
  const size_t n = size_t(seconds * rate);
  std::vector<float> x = held_out_coloured(rng, static_cast<HeldOutColour>(rng.index(3)), n, rate);
  if (rng.chance(0.4)) {  // gusts: noise gated on and off, not swelling
    const double period = rng.uniform(0.3, 1.5), duty = rng.uniform(0.4, 0.8);
    for (size_t i = 0; i < n; ++i) {
      if (std::fmod(double(i) / rate, period) > duty * period) x[i] *= 0.2f;
    }
  }
  return x;
}

std::vector<float> noise(Rng& rng, double seconds, int rate) {
  const size_t n = size_t(seconds * rate);
  std::vector<float> x = coloured(rng, static_cast<Colour>(rng.index(4)), n, rate);
  if (rng.chance(0.5)) {  // slow swells, like wind or a passing car
    const double f = rng.uniform(0.1, 2.0), depth = rng.uniform(0.1, 0.6), phase = rng.uniform(0, 6.283);
    for (size_t i = 0; i < n; ++i) x[i] *= float(1.0 + depth * std::sin(6.283 * f * double(i) / rate + phase));
  }
  if (rng.chance(0.25)) {  // crackle, like rain or a fire
    const double per_second = rng.uniform(20, 200), level = rng.uniform(1, 4) * rms(x);
    for (size_t i = 0; i < n; ++i) {
      if (rng.chance(per_second / rate)) x[i] += float(rng.uniform(-level, level));
    }
  }
  return x;
}

std::vector<float> silence(Rng& rng, double seconds, int rate) {
  const size_t n = size_t(seconds * rate);
  const double kind = rng.uniform();
  if (kind < 0.3) return std::vector<float>(n, 0.0f);  // digital silence
  if (kind < 0.5) {                                   // 16-bit dither
    std::vector<float> x(n);
    for (float& s : x) s = float(rng.uniform(-1, 1) / 32768.0);
    return x;
  }
  std::vector<float> x = coloured(rng, static_cast<Colour>(rng.index(3)), n, rate);
  scale_to_rms(x, rng.uniform(-95, -62));  // a quiet room, a recorder's own hiss
  if (rng.chance(0.3)) {
    const double hz = rng.chance(0.5) ? 50 : 60, level = db_to_gain(rng.uniform(-90, -66));
    for (size_t i = 0; i < n; ++i) x[i] += float(level * std::sin(6.283185 * hz * double(i) / rate));
  }
  return x;
}

// Held-out silence: a DC offset with triangular dither, or a held-out colour
// far down with mains harmonics; always below -62 dBFS like training's.
std::vector<float> held_out_silence(Rng& rng, double seconds, int rate) {
  const size_t n = size_t(seconds * rate);
  if (rng.chance(0.4)) {
    const double offset = db_to_gain(rng.uniform(-90, -70)) * (rng.chance(0.5) ? 1 : -1);
    std::vector<float> x(n);
    for (float& s : x) s = float(offset + (rng.uniform(-1, 1) + rng.uniform(-1, 1)) / 65536.0);
    return x;
  }
  std::vector<float> x = held_out_coloured(rng, static_cast<HeldOutColour>(rng.index(2)), n, rate);
  scale_to_rms(x, rng.uniform(-95, -66));
  const double hz = rng.chance(0.5) ? 50 : 60, level = db_to_gain(rng.uniform(-95, -72));
  for (size_t i = 0; i < n; ++i) {
    for (int k = 2; k <= 3; ++k) x[i] += float(level / k * std::sin(6.283185 * hz * k * double(i) / rate));
  }
  return x;
}

void one_pole(std::vector<float>& x, double cutoff_hz, int rate, bool high_pass) {
  const double a = std::exp(-6.283185 * cutoff_hz / rate);
  double lp = 0;
  for (float& s : x) {
    lp = a * lp + (1 - a) * s;
    s = float(high_pass ? s - lp : lp);
  }
}

}  // namespace

const char* label_name(Label label) {
  static const char* names[] = {"speech", "music", "noise", "silence"};
  return names[int(label)];
}

std::vector<float> generate(Label label, Rng& rng, Split split, double seconds, int rate) {
  // kHeldOutVoices: held-out espeak-ng voices, training's other generators.
  const bool held = split == Split::kHeldOut;
  switch (label) {
    case Label::kSpeech: return speech(rng, split, seconds, rate);
    case Label::kMusic: return music(rng, seconds, rate, held ? MusicSet::kHeldOut : MusicSet::kTrain);
    case Label::kNoise: return held ? held_out_noise(rng, seconds, rate) : noise(rng, seconds, rate);
    case Label::kSilence: return held ? held_out_silence(rng, seconds, rate) : silence(rng, seconds, rate);
  }
  throw std::invalid_argument("unknown label");
}

void augment(Label label, Rng& rng, std::vector<float>& x, int rate) {
  if (label == Label::kSilence) return;
  if (rng.chance(0.5)) one_pole(x, rng.uniform(1500, 7000), rate, false);  // a dull microphone
  if (rng.chance(0.4)) one_pole(x, rng.uniform(60, 500), rate, true);      // a thin one
  scale_to_rms(x, rng.uniform(-42, -8));
  if (label != Label::kNoise && rng.chance(0.5)) {  // background noise, 8-30 dB below
    std::vector<float> bg = coloured(rng, static_cast<Colour>(rng.index(4)), x.size(), rate);
    scale_to_rms(bg, 20 * std::log10(std::max(rms(x), 1e-9)) - rng.uniform(8, 30));
    for (size_t i = 0; i < x.size(); ++i) x[i] += bg[i];
  }
  if (rng.chance(0.15)) {  // overdriven and clipped
    const float drive = float(rng.uniform(1.5, 4.0) / std::max(rms(x) * 4, 1e-9));
    for (float& s : x) s *= drive;
  }
  for (float& s : x) s = std::clamp(s, -1.0f, 1.0f);
}

std::vector<LabeledSegment> labeled_segments(Split split, uint64_t seed, int per_class, int rate,
                                             double segment_seconds) {
  Rng rng(seed * 4 + (split == Split::kTrain ? 1 : 2));
  const size_t length = size_t(segment_seconds * rate), frame = size_t(rate / 50);
  std::vector<LabeledSegment> out;
  for (int l = 0; l < kLabelCount; ++l) {
    const Label label = static_cast<Label>(l);
    for (int count = 0; count < per_class;) {
      std::vector<float> x = generate(label, rng, split, 4 * segment_seconds + 2, rate);
      // Voiced 20-ms frames of the clean recording, so that no "speech" segment is a pause.
      std::vector<bool> voiced(x.size() / frame + 1, true);
      if (label == Label::kSpeech) {
        const double loud = rms(x) * 0.15;
        for (size_t f = 0; f * frame < x.size(); ++f) voiced[f] = rms(x, f * frame, (f + 1) * frame) > loud;
      }
      augment(label, rng, x, rate);
      int taken = 0;  // at most 6 segments per recording, so each class has many speakers/pieces
      for (int tries = 0; tries < 12 && taken < 6 && count < per_class && x.size() >= length; ++tries) {
        const size_t at = rng.index(x.size() - length + 1);
        const auto v0 = voiced.begin() + long(at / frame), v1 = voiced.begin() + long((at + length) / frame);
        if (std::count(v0, v1, true) * 2 < v1 - v0) continue;
        LabeledSegment seg{std::vector<float>(x.begin() + long(at), x.begin() + long(at + length)), label};
        if (rng.chance(0.1)) std::fill(seg.samples.begin() + long(rng.uniform(0.3, 0.9) * length), seg.samples.end(), 0.0f);
        out.push_back(std::move(seg));
        ++taken;
        ++count;
      }
    }
  }
  return out;
}

std::vector<DemoPart> demo_parts() {
  return {{Label::kSpeech, 0, 8}, {Label::kMusic, 8, 16}, {Label::kNoise, 16, 22}, {Label::kSilence, 22, 28}};
}

// The demo is the timeline README shows: held-out voices and seeds, and the
// music, noise and silence generators it was first made with (training's).
std::vector<float> demo_samples(int rate) {
  Rng rng(20261123);
  const double levels[] = {-20, -18, -26, 0};  // dBFS RMS; silence keeps its own level
  std::vector<float> out;
  for (const DemoPart& p : demo_parts()) {
    std::vector<float> x = generate(p.label, rng, Split::kHeldOutVoices, p.end - p.start, rate);
    x.resize(size_t((p.end - p.start) * rate), 0.0f);
    if (p.label != Label::kSilence) scale_to_rms(x, levels[int(p.label)]);
    out.insert(out.end(), x.begin(), x.end());
  }
  for (float& s : out) s = std::clamp(s, -1.0f, 1.0f);
  return out;
}

}  // namespace corepool::synth
