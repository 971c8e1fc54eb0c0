// Notes are rendered one at a time into the output buffer; each note's timbre,
// envelope and level are drawn when the part (melody, chords, bass) is set up,
// so a piece sounds like a few instruments rather than a random note cloud.
#include "tools/music_synth.h"

#include <algorithm>
#include <cmath>

namespace corepool::synth {
namespace {

constexpr double kTwoPi = 6.283185307179586476925;

enum class Tone { kAdditive, kPluck, kFm, kReed, kBell, kBowed, kOrgan, kMallet };  // the last four: held out

struct Instrument {
  Tone tone = Tone::kAdditive;
  int harmonics = 4;
  double rolloff = 1.5;  // harmonic k has amplitude 1 / k^rolloff
  double attack = 0.01, decay = 0.1, sustain = 0.6, release = 0.1;  // seconds / level
  double fm_ratio = 2.0, fm_index = 2.0;
  double vibrato_hz = 0, vibrato_depth = 0;  // depth as a fraction of the frequency
};

Instrument random_instrument(Rng& rng) {
  Instrument in;
  in.tone = static_cast<Tone>(rng.index(4));
  in.harmonics = 1 + int(rng.index(7));
  in.rolloff = rng.uniform(0.8, 2.5);
  in.attack = rng.uniform(0.003, 0.08);
  in.decay = rng.uniform(0.05, 0.4);
  in.sustain = rng.uniform(0.2, 0.9);
  in.release = rng.uniform(0.03, 0.3);
  in.fm_ratio = rng.pick(std::vector<double>{1.0, 2.0, 3.0, 3.5, 1.4});
  in.fm_index = rng.uniform(0.5, 4.0);
  if (rng.chance(0.4)) {
    in.vibrato_hz = rng.uniform(4.0, 7.0);
    in.vibrato_depth = rng.uniform(0.002, 0.01);
  }
  return in;
}

// One of the held-out instruments, with envelopes that suit it.
Instrument held_out_instrument(Rng& rng) {
  Instrument in;
  in.tone = static_cast<Tone>(4 + rng.index(4));
  in.attack = in.tone == Tone::kBowed ? rng.uniform(0.08, 0.3) : rng.uniform(0.001, 0.01);
  in.decay = rng.uniform(0.1, 0.5);
  in.sustain = in.tone == Tone::kOrgan || in.tone == Tone::kBowed ? rng.uniform(0.7, 1.0) : rng.uniform(0.05, 0.3);
  in.release = rng.uniform(0.05, 0.5);
  if (in.tone == Tone::kBowed || rng.chance(0.3)) {
    in.vibrato_hz = rng.uniform(4.5, 6.5);
    in.vibrato_depth = rng.uniform(0.003, 0.012);
  }
  return in;
}

double envelope(const Instrument& in, double t, double held) {
  if (t < in.attack) return t / in.attack;
  if (t < in.attack + in.decay) return 1.0 - (1.0 - in.sustain) * (t - in.attack) / in.decay;
  if (t < held) return in.sustain;
  const double r = (t - held) / in.release;
  return r < 1.0 ? in.sustain * (1.0 - r) : 0.0;
}

// Partials of the held-out instruments: (ratio to the fundamental, amplitude, decay per second).
struct Partial {
  double ratio, amplitude, decay;
};
const std::vector<Partial>& partials(Tone tone) {
  static const std::vector<Partial> bell = {{1.0, 1.0, 1.5}, {2.76, 0.6, 2.5}, {5.40, 0.4, 4.0},
                                            {8.93, 0.25, 6.0}, {0.5, 0.3, 1.0}};  // inharmonic, like a bell
  static const std::vector<Partial> organ = {{1, 1.0, 0}, {2, 0.8, 0}, {3, 0.6, 0}, {4, 0.5, 0},
                                             {6, 0.4, 0}, {8, 0.3, 0}};  // drawbars: no decay at all
  static const std::vector<Partial> mallet = {{1.0, 1.0, 6.0}, {3.9, 0.5, 18.0}, {9.2, 0.2, 30.0}};  // marimba-like
  static const std::vector<Partial> none;
  return tone == Tone::kBell ? bell : tone == Tone::kOrgan ? organ : tone == Tone::kMallet ? mallet : none;
}

double voice(const Instrument& in, double phase, double t, double frequency, int rate) {
  switch (in.tone) {
    case Tone::kBell:
    case Tone::kOrgan:
    case Tone::kMallet: {
      double sum = 0;
      for (const Partial& p : partials(in.tone)) {
        if (p.ratio * frequency >= 0.45 * rate) continue;
        sum += p.amplitude * std::exp(-p.decay * t) * std::sin(p.ratio * phase);
      }
      return sum;
    }
    case Tone::kBowed: {  // a band-limited sawtooth: every harmonic at 1/k
      double sum = 0;
      for (int k = 1; k <= 16 && k * frequency < 0.45 * rate; ++k) sum += std::sin(k * phase) / k;
      return sum;
    }
    case Tone::kFm:
      return std::sin(phase + in.fm_index * std::exp(-3.0 * t) * std::sin(in.fm_ratio * phase));
    case Tone::kPluck:
    case Tone::kAdditive:
    case Tone::kReed: {
      double sum = 0;
      const int step = in.tone == Tone::kReed ? 2 : 1;  // odd harmonics only: clarinet-like
      for (int k = 1; k <= in.harmonics * step; k += step) {
        if (k * frequency >= 0.45 * rate) break;
        double a = 1.0 / std::pow(double(k), in.rolloff);
        if (in.tone == Tone::kPluck) a *= std::exp(-t * 3.0 * k);  // high partials die first
        sum += a * std::sin(k * phase);
      }
      return sum;
    }
  }
  return 0;
}

// Adds one note starting at `start` s, held `held` s, then released.
void add_note(std::vector<float>& out, int rate, const Instrument& in, double start, double held,
              double frequency, double level) {
  const int64_t first = int64_t(start * rate);
  const int64_t frames = int64_t((held + in.release) * rate);
  double phase = 0;
  for (int64_t i = 0; i < frames && first + i < int64_t(out.size()); ++i) {
    const double t = double(i) / rate;
    const double f = frequency * (1.0 + in.vibrato_depth * std::sin(kTwoPi * in.vibrato_hz * t));
    phase += kTwoPi * f / rate;
    if (phase > 1e6) phase = std::fmod(phase, kTwoPi);
    out[size_t(first + i)] += float(level * envelope(in, t, held) * voice(in, phase, t, frequency, rate));
  }
}

double midi_hz(int note) { return 440.0 * std::pow(2.0, (note - 69) / 12.0); }

const std::vector<std::vector<int>>& scales() {
  static const std::vector<std::vector<int>> s = {
      {0, 2, 4, 5, 7, 9, 11}, {0, 2, 3, 5, 7, 8, 10}, {0, 2, 4, 7, 9}, {0, 2, 3, 5, 7, 9, 10}};
  return s;
}

// Whole-tone, harmonic minor, blues, phrygian dominant: none of the training scales.
const std::vector<std::vector<int>>& held_out_scales() {
  static const std::vector<std::vector<int>> s = {
      {0, 2, 4, 6, 8, 10}, {0, 2, 3, 5, 7, 8, 11}, {0, 3, 5, 6, 7, 10}, {0, 1, 4, 5, 7, 8, 10}};
  return s;
}

struct Key {
  int root = 60;
  std::vector<int> scale;
  int note(int degree) const {  // degree may exceed the scale: next octave
    const int n = int(scale.size());
    const int octave = degree >= 0 ? degree / n : (degree - n + 1) / n;
    return root + 12 * octave + scale[size_t(degree - octave * n)];
  }
};

void add_melody(std::vector<float>& out, int rate, Rng& rng, const Key& key, double beat, double seconds) {
  const Instrument in = random_instrument(rng);
  const double level = rng.uniform(0.5, 1.0);
  int degree = int(rng.index(key.scale.size()));
  for (double t = 0; t < seconds;) {
    const double length = beat * rng.pick(std::vector<double>{0.5, 0.5, 1.0, 1.0, 1.5, 2.0});
    degree = std::clamp(degree + int(rng.index(5)) - 2, -3, 2 * int(key.scale.size()));
    if (!rng.chance(0.1)) add_note(out, rate, in, t, length * 0.9, midi_hz(key.note(degree) + 12), level);
    t += length;
  }
}

void add_chords_and_bass(std::vector<float>& out, int rate, Rng& rng, const Key& key, double beat,
                         double seconds) {
  const Instrument pad = random_instrument(rng);
  const Instrument bass = random_instrument(rng);
  const bool with_bass = rng.chance(0.6);
  const double level = rng.uniform(0.2, 0.5);
  for (double t = 0; t < seconds; t += 4 * beat) {
    const int degree = rng.pick(std::vector<int>{0, 3, 4, 5, 1});
    for (int k = 0; k < 3; ++k) add_note(out, rate, pad, t, 3.8 * beat, midi_hz(key.note(degree + 2 * k)), level);
    if (!with_bass) continue;
    for (int b = 0; b < 4; ++b) add_note(out, rate, bass, t + b * beat, 0.8 * beat, midi_hz(key.note(degree) - 12), level);
  }
}

// Kick (falling sine), snare (noise burst) and hi-hat (short bright noise).
void add_drums(std::vector<float>& out, int rate, Rng& rng, double beat) {
  const double level = rng.uniform(0.2, 0.6);
  for (int64_t step = 0; step * beat / 2 < double(out.size()) / rate; ++step) {
    const int64_t at = int64_t(step * beat / 2 * rate);
    const bool kick = step % 4 == 0, snare = step % 4 == 2;
    const int64_t len = int64_t((kick || snare ? 0.15 : 0.04) * rate);
    double phase = 0;
    for (int64_t i = 0; i < len && at + i < int64_t(out.size()); ++i) {
      const double t = double(i) / rate, env = std::exp(-t * (kick ? 25 : 40));
      phase += kTwoPi * (50 + 100 * std::exp(-t * 30)) / rate;
      const double s = kick ? std::sin(phase) : rng.uniform(-1, 1) * (snare ? 0.7 : 0.3);
      out[size_t(at + i)] += float(level * env * s);
    }
  }
}

// The held-out piece: a melody, and chords broken into arpeggios in triple
// time (three beats to the bar), at tempi below or above the training range.
void add_held_out_piece(std::vector<float>& out, int rate, Rng& rng, double seconds) {
  const Key key{rng.chance(0.5) ? 38 + int(rng.index(8)) : 62 + int(rng.index(8)), rng.pick(held_out_scales())};
  const double beat = 60.0 / (rng.chance(0.5) ? rng.uniform(45, 68) : rng.uniform(175, 220));
  const Instrument lead = held_out_instrument(rng), arp = held_out_instrument(rng);
  const double lead_level = rng.uniform(0.5, 1.0), arp_level = rng.uniform(0.2, 0.6);
  int degree = int(rng.index(key.scale.size()));
  for (double t = 0; t < seconds;) {
    const double length = beat * rng.pick(std::vector<double>{1.0, 1.0, 2.0, 3.0, 0.5});
    degree = std::clamp(degree + int(rng.index(7)) - 3, -2, 2 * int(key.scale.size()));
    if (!rng.chance(0.15)) add_note(out, rate, lead, t, length * 0.95, midi_hz(key.note(degree) + 12), lead_level);
    t += length;
  }
  if (rng.chance(0.2)) return;  // a solo line
  for (double bar = 0; bar < seconds; bar += 3 * beat) {
    const int root = rng.pick(std::vector<int>{0, 2, 3, 4, 5});
    for (int step = 0; step < 6; ++step) {  // eighths: up and down the chord
      const int tone = std::vector<int>{0, 2, 4, 7, 4, 2}[size_t(step)];
      add_note(out, rate, arp, bar + step * beat / 2, beat / 2, midi_hz(key.note(root + tone)), arp_level);
    }
  }
}

void normalise_peak(std::vector<float>& out) {
  float peak = 1e-9f;
  for (float s : out) peak = std::max(peak, std::fabs(s));
  for (float& s : out) s *= 0.9f / peak;
}

}  // namespace

std::vector<float> music(Rng& rng, double seconds, int rate, MusicSet set) {
  std::vector<float> out(size_t(seconds * rate), 0.0f);
  if (set == MusicSet::kHeldOut) {
    add_held_out_piece(out, rate, rng, seconds);
    normalise_peak(out);
    return out;
  }
  Key key{48 + int(rng.index(12)), rng.pick(scales())};
  const double beat = 60.0 / rng.uniform(70, 170);
  add_melody(out, rate, rng, key, beat, seconds);
  if (rng.chance(0.7)) add_chords_and_bass(out, rate, rng, key, beat, seconds);
  if (rng.chance(0.35)) add_drums(out, rate, rng, beat);
  normalise_peak(out);
  return out;
}

}  // namespace corepool::synth
