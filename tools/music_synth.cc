// Notes are rendered one at a time into the output buffer; each note's timbre,
// envelope and level are drawn when the part (melody, chords, bass) is set up,
// so a piece sounds like a few instruments rather than a random note cloud.
#include "tools/music_synth.h"

#include <algorithm>
#include <cmath>

namespace corepool::synth {
namespace {

constexpr double kTwoPi = 6.283185307179586476925;

enum class Tone { kAdditive, kPluck, kFm, kReed };

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

double envelope(const Instrument& in, double t, double held) {
  if (t < in.attack) return t / in.attack;
  if (t < in.attack + in.decay) return 1.0 - (1.0 - in.sustain) * (t - in.attack) / in.decay;
  if (t < held) return in.sustain;
  const double r = (t - held) / in.release;
  return r < 1.0 ? in.sustain * (1.0 - r) : 0.0;
}

double voice(const Instrument& in, double phase, double t, double frequency, int rate) {
  switch (in.tone) {
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

}  // namespace

std::vector<float> music(Rng& rng, double seconds, int rate) {
  std::vector<float> out(size_t(seconds * rate), 0.0f);
  Key key{48 + int(rng.index(12)), rng.pick(scales())};
  const double beat = 60.0 / rng.uniform(70, 170);
  add_melody(out, rate, rng, key, beat, seconds);
  if (rng.chance(0.7)) add_chords_and_bass(out, rate, rng, key, beat, seconds);
  if (rng.chance(0.35)) add_drums(out, rate, rng, beat);
  float peak = 1e-9f;
  for (float s : out) peak = std::max(peak, std::fabs(s));
  for (float& s : out) s *= 0.9f / peak;
  return out;
}

}  // namespace corepool::synth
