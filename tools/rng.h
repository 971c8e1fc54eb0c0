// A seeded random source whose draws are the same with every standard library:
// mt19937_64's raw output is fixed by the standard, the distributions are not,
// so every draw here is spelled out from raw bits. Used by the sound generators
// (tools/sound_classes.cc) that make training, test and demo audio.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace corepool::synth {

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}

  // Uniform in [0, 1) from the top 53 bits of one draw.
  double uniform() { return double(gen_() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform in {0 .. n-1}; n must be > 0.
  size_t index(size_t n) {
    const size_t i = size_t(uniform() * double(n));
    return i < n ? i : n - 1;
  }
  bool chance(double p) { return uniform() < p; }
  // Standard normal (Box-Muller; one of the pair is dropped for simplicity).
  double normal() {
    const double u = 1.0 - uniform();  // (0, 1]: log(u) is finite
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * uniform());
  }
  template <typename T>
  const T& pick(const std::vector<T>& items) { return items[index(items.size())]; }
  uint64_t bits() { return gen_(); }

 private:
  std::mt19937_64 gen_;
};

}  // namespace corepool::synth
