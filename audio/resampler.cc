// Resampler: a thin streaming wrapper over one soxr_t, used by AudioStream to
// bring every file to the model's rate. Owns the soxr_t.
//
// Quality: SOXR_HQ (20-bit: stop-band rejection beyond 16-bit audio). It
// replaced libsamplerate's SRC_SINC_FASTEST, which was half of `corepool
// batch`'s CPU time with the default tagger: perf over 10 minutes of 44.1 kHz
// audio put libsamplerate at 48 % of 3.2 s, soxr at 4 % of 1.3 s (RESULTS.md).
#include "audio/resampler.h"

#include <soxr.h>

#include <stdexcept>
#include <string>

namespace corepool {
namespace {

// Output slack per call beyond in * ratio: the filter may release samples it
// held back from the previous call, and a flush releases its whole tail.
constexpr size_t kOutputSlack = 1024;

}  // namespace

Resampler::Resampler(int in_rate, int out_rate) : in_rate_(in_rate), out_rate_(out_rate) {
  if (in_rate <= 0 || out_rate <= 0) {
    throw std::runtime_error("cannot resample " + std::to_string(in_rate) + " Hz to " +
                             std::to_string(out_rate) + " Hz");
  }
  if (passthrough()) return;
  soxr_error_t err = nullptr;
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  const soxr_runtime_spec_t runtime = soxr_runtime_spec(1);  // one thread: no OpenMP region, fork-safe
  state_ = soxr_create(in_rate, out_rate, 1, &err, &io, &quality, &runtime);
  if (!state_ || err) {
    if (state_) soxr_delete(state_);
    state_ = nullptr;
    throw std::runtime_error("soxr cannot resample " + std::to_string(in_rate) + " Hz to " +
                             std::to_string(out_rate) + " Hz: " + (err ? err : "unknown error"));
  }
}

Resampler::~Resampler() {
  if (state_) soxr_delete(state_);
}

// Writes straight into the tail of `out`: grow, let soxr fill, shrink to what
// it produced. Loops because one call may not consume all input (output full)
// and a flush (no input) is only complete once a call produces nothing.
void Resampler::process(const float* in, size_t n, bool end_of_input, std::vector<float>& out) {
  if (passthrough()) {
    out.insert(out.end(), in, in + n);
    return;
  }
  const double ratio = double(out_rate_) / in_rate_;
  size_t used = 0;
  for (;;) {
    const size_t left = n - used;
    const size_t room = size_t(double(left) * ratio) + kOutputSlack;
    const size_t old_size = out.size();
    out.resize(old_size + room);
    size_t in_done = 0, out_done = 0;
    // No input pointer at all tells soxr the input has ended (flush).
    const bool flush = left == 0 && end_of_input;
    const soxr_error_t err = soxr_process(state_, flush ? nullptr : in + used, left, &in_done,
                                          out.data() + old_size, room, &out_done);
    out.resize(old_size + (err ? 0 : out_done));
    if (err) throw std::runtime_error(std::string("soxr_process failed: ") + err);
    used += in_done;
    if (used < n) continue;
    if (!end_of_input || (flush && out_done == 0)) return;
  }
}

}  // namespace corepool
