// corepool-resampler-bench: our Resampler (libsoxr direct, SOXR_HQ) against
// FFmpeg's libswresample, with its own engine and with soxr behind it, on the
// conversions corepool makes most (44.1 and 48 kHz files, 8 kHz telephone
// audio to a 16 kHz model). Issue 36 asked: swresample with soxr if equal in
// quality and faster. One run, one table: for each conversion, the best of
// `--reps` wall times over `--seconds` of audio fed in 32,768-frame blocks
// (AudioStream's), and the signal-to-error ratio against a reference made in
// the same run by soxr at its very-high quality in one call.
#include <soxr.h>

extern "C" {
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
}

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "audio/resampler.h"
#include "bench/best_ms.h"

namespace corepool {
namespace {

constexpr size_t kBlock = 32768;

// A sweep from 50 Hz to just under the input's Nyquist over a noise bed: every
// band the filters pass, cut or alias is in it.
std::vector<float> signal(int rate, double seconds) {
  std::vector<float> x(size_t(rate * seconds));
  uint32_t s = 12345;
  const double top = 0.45 * rate;
  for (size_t i = 0; i < x.size(); ++i) {
    const double t = double(i) / rate, period = 10.0, u = std::fmod(t, period) / period;
    const double phase = 2 * M_PI * period * (50 * u + (top - 50) * u * u / 2);
    s = s * 1664525u + 1013904223u;
    x[i] = float(0.5 * std::sin(phase) + 0.05 * (double(s >> 8) / double(1 << 24) - 0.5));
  }
  return x;
}

std::vector<float> with_corepool(const std::vector<float>& x, int in, int out) {
  Resampler r(in, out);
  std::vector<float> y;
  for (size_t at = 0; at < x.size(); at += kBlock) {
    r.process(x.data() + at, std::min(kBlock, x.size() - at), false, y);
  }
  r.process(nullptr, 0, true, y);
  return y;
}

// swresample, mono float, `engine` "swr" or "soxr" (with soxr's default
// precision there, 20 bits: SOXR_HQ, the same as ours).
std::vector<float> with_swr(const std::vector<float>& x, int in, int out, const char* engine) {
  SwrContext* swr = nullptr;
  AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
  if (swr_alloc_set_opts2(&swr, &mono, AV_SAMPLE_FMT_FLT, out, &mono, AV_SAMPLE_FMT_FLT, in, 0, nullptr) < 0 ||
      av_opt_set(swr, "resampler", engine, 0) < 0 || swr_init(swr) < 0) {
    swr_free(&swr);
    throw std::runtime_error(std::string("swresample (") + engine + ") refused " + std::to_string(in) + " -> " +
                             std::to_string(out));
  }
  std::vector<float> y;
  auto run = [&](const float* src, int n) {
    const int room = swr_get_out_samples(swr, n);
    const size_t old = y.size();
    y.resize(old + size_t(std::max(room, 0)));
    auto* dst = reinterpret_cast<uint8_t*>(y.data() + old);
    const auto* from = reinterpret_cast<const uint8_t*>(src);
    const int got = swr_convert(swr, &dst, room, src ? &from : nullptr, n);
    y.resize(old + size_t(std::max(got, 0)));
  };
  for (size_t at = 0; at < x.size(); at += kBlock) run(x.data() + at, int(std::min(kBlock, x.size() - at)));
  run(nullptr, 0);  // flush
  swr_free(&swr);
  return y;
}

std::vector<float> reference(const std::vector<float>& x, int in, int out) {
  std::vector<float> y(size_t(double(x.size()) * out / in) + 64);
  size_t done = 0;
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t q = soxr_quality_spec(SOXR_VHQ, 0);
  if (soxr_oneshot(in, out, 1, x.data(), x.size(), nullptr, y.data(), y.size(), &done, &io, &q, nullptr)) {
    throw std::runtime_error("soxr_oneshot failed");
  }
  y.resize(done);
  return y;
}

// Signal-to-error ratio against the reference over the middle 90 %, after
// the best alignment within +-64 samples (filters differ in delay).
double snr_db(const std::vector<float>& want, const std::vector<float>& got) {
  double best = -1e9;
  const size_t from = want.size() / 20, to = want.size() * 19 / 20;
  for (int lag = -64; lag <= 64; ++lag) {
    double signal = 0, error = 0;
    for (size_t i = from; i < to; ++i) {
      const long j = long(i) + lag;
      if (j < 0 || size_t(j) >= got.size()) continue;
      signal += double(want[i]) * want[i];
      error += (double(got[size_t(j)]) - want[i]) * (double(got[size_t(j)]) - want[i]);
    }
    best = std::max(best, 10 * std::log10(signal / std::max(error, 1e-30)));
  }
  return best;
}

}  // namespace
}  // namespace corepool

int main(int argc, char** argv) {
  using namespace corepool;
  CLI::App app{"corepool-resampler-bench: corepool's soxr resampler against FFmpeg's swresample (swr and soxr)"};
  double seconds = 600;
  int reps = 3;
  app.add_option("--seconds", seconds, "audio per conversion")->capture_default_str();
  app.add_option("--reps", reps, "timed runs; the best counts")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const std::vector<std::pair<int, int>> conversions = {{44100, 16000}, {48000, 16000}, {8000, 16000}, {22050, 32000}};
  struct Way {
    const char* name;
    std::function<std::vector<float>(const std::vector<float>&, int, int)> run;
  };
  const std::vector<Way> ways = {
      {"corepool (soxr HQ)", with_corepool},
      {"swresample, swr", [](const auto& x, int i, int o) { return with_swr(x, i, o, "swr"); }},
      {"swresample, soxr", [](const auto& x, int i, int o) { return with_swr(x, i, o, "soxr"); }},
  };
  std::printf("%.0f s of audio per conversion, %zu-frame blocks, best of %d; SNR against soxr VHQ in one call\n",
              seconds, kBlock, reps);
  std::printf("%-14s %-20s %10s %14s %9s\n", "conversion", "resampler", "ms", "x real time", "SNR dB");
  for (const auto& [in, out] : conversions) {
    const std::vector<float> x = signal(in, seconds);
    const std::vector<float> want = reference(x, in, out);
    for (const Way& way : ways) {
      std::vector<float> y;
      const double ms = best_ms([&] { y = way.run(x, in, out); }, reps);
      std::printf("%6d->%-6d %-20s %10.1f %14.0f %9.1f\n", in, out, way.name, ms, seconds * 1000 / ms,
                  snr_db(want, y));
    }
  }
  return 0;
}
