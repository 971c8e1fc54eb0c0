// Streaming mono resampler over libsoxr, one thread (soxr's default runtime
// spec: it never enters an OpenMP region, so it is safe in a process that
// later forks). Owned by one AudioStream; not thread-safe.
#pragma once

#include <cstddef>
#include <vector>

struct soxr;

namespace corepool {

class Resampler {
 public:
  // Throws std::runtime_error if soxr refuses the rates.
  Resampler(int in_rate, int out_rate);
  ~Resampler();
  Resampler(const Resampler&) = delete;
  Resampler& operator=(const Resampler&) = delete;

  // Appends the resampled version of `in[0..n)` to `out`. `end_of_input` flushes
  // the filter's tail; after that the resampler must not be fed again.
  void process(const float* in, size_t n, bool end_of_input, std::vector<float>& out);
  bool passthrough() const { return in_rate_ == out_rate_; }

 private:
  int in_rate_;
  int out_rate_;
  soxr* state_ = nullptr;
};

}  // namespace corepool
