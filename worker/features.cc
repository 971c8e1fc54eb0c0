// Log-mel in one pass per frame, everything in L1: reflect-padded centred
// frames times a periodic Hann window, FFTW's real-to-complex transform, the
// power spectrum, each HTK mel filter over its nonzero bins only, then the
// natural log with a floor over the whole batch at once (vectorised).
// LibTorch's stft + abs + square + matmul computed the same in six passes over
// [B, 257, frames] tensors and a dense 64 x 257 product of which about 97 %
// multiplies zeros: about 2 % of CNN10's forward() per segment, and most of
// the default tagger's whole engine time. Consecutive segments of one stream
// overlap (hop < segment), and the frames they share are computed once
// (shared_frames below).
#include "worker/features.h"

#include <fftw3.h>
#include <pthread.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace corepool {
namespace {

double hz_to_mel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double mel_to_hz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

// log(mel + kFloor): the floor keeps silence finite (about -13.8).
constexpr double kLogFloor = 1e-6;

// FFTW's planner is not thread-safe (its execute functions are): engine
// threads build their extractors concurrently.
std::mutex& planner_mutex() {
  static std::mutex mu;
  return mu;
}

// Process mode forks workers while another thread of the supervisor may be
// planning (a reload builds and calibrates a new engine): a child would
// inherit the mutex held by a thread it does not have, and FFTW's planner
// halfway through an update. So every fork waits until the planner is free,
// as glibc's malloc does for its own locks. Registered during static
// initialisation, before any thread exists: glibc skips the child handler
// of a registration that raced with a fork's prepare phase, so a lazy
// registration could let the first fork copy the mutex locked.
struct HoldPlannerAcrossFork {
  HoldPlannerAcrossFork() {
    ::pthread_atfork([] { planner_mutex().lock(); }, [] { planner_mutex().unlock(); },
                     [] { planner_mutex().unlock(); });
  }
};
const HoldPlannerAcrossFork hold_planner_across_fork;

// FFTW_ESTIMATE: the same plan in every process and every run, so that every
// worker computes bit-identical features (FFTW_MEASURE times candidates and
// may pick differently each time).
std::shared_ptr<void> make_plan(int n_fft) {
  std::lock_guard<std::mutex> lock(planner_mutex());
  float* in = fftwf_alloc_real(n_fft);
  fftwf_complex* out = fftwf_alloc_complex(n_fft / 2 + 1);
  fftwf_plan plan = fftwf_plan_dft_r2c_1d(n_fft, in, out, FFTW_ESTIMATE);
  fftwf_free(in);
  fftwf_free(out);
  if (!plan) throw std::runtime_error("features: FFTW cannot plan a " + std::to_string(n_fft) + "-point transform");
  return std::shared_ptr<void>(plan, [](void* p) {
    std::lock_guard<std::mutex> lock(planner_mutex());
    fftwf_destroy_plan(static_cast<fftwf_plan>(p));
  });
}

// FFTW's SIMD-aligned buffers: the new-array execute functions need the
// alignment the plan was made with.
template <class T>
struct FftwBuffer {
  T* data;
  explicit FftwBuffer(size_t n) : data(static_cast<T*>(fftwf_malloc(sizeof(T) * n))) {
    if (!data) throw std::bad_alloc();
  }
  ~FftwBuffer() { fftwf_free(data); }
  FftwBuffer(const FftwBuffer&) = delete;
  FftwBuffer& operator=(const FftwBuffer&) = delete;
};

// torch.stft(center=True, pad_mode="reflect"): x[-i] = x[i], x[n-1+i] = x[n-1-i].
void reflect_pad(const float* x, int64_t n, int pad, float* out) {
  for (int i = 1; i <= pad; ++i) out[pad - i] = x[i];
  std::memcpy(out + pad, x, sizeof(float) * n);
  for (int i = 1; i <= pad; ++i) out[pad + n - 1 + i] = x[n - 1 - i];
}

// Item b's frames that item b-1 has already computed: when b's first
// samples - hop samples are b-1's last ones byte for byte (b follows b-1 in
// its stream), frame t of b, where its window lies inside the real samples
// of both (no reflected padding), is frame t + hop / hop_length of b-1: same
// bytes in, same FFTW plan, the same mel row to the bit.
struct SharedFrames {
  int64_t first = 0, last = -1;  // frames of b to copy, inclusive
  int64_t shift = 0;             // from frame t + shift of b-1
};

SharedFrames shared_frames(const ModelConfig& c, const float* previous, const float* item) {
  const int64_t samples = c.segment_samples(), hop = c.hop_samples(), pad = c.n_fft / 2;
  if (hop <= 0 || hop >= samples || hop % c.hop_length != 0) return {};
  if (std::memcmp(item, previous + hop, sizeof(float) * (samples - hop)) != 0) return {};
  const int64_t last_end = samples - hop + pad - c.n_fft;  // t * hop_length may reach this
  if (last_end < 0) return {};
  SharedFrames s;
  s.shift = hop / c.hop_length;
  s.first = (pad + c.hop_length - 1) / c.hop_length;  // the window starts at or after sample 0
  s.last = last_end / c.hop_length;                   // and ends inside the part b shares with b-1
  return s;
}

}  // namespace

std::vector<float> mel_filterbank_weights(int sample_rate, int n_fft, int n_mels, double fmin, double fmax) {
  if (fmax <= 0) fmax = sample_rate / 2.0;
  const int bins = n_fft / 2 + 1;
  std::vector<double> edges(n_mels + 2);
  const double lo = hz_to_mel(fmin), hi = hz_to_mel(fmax);
  for (int i = 0; i < n_mels + 2; ++i) edges[i] = mel_to_hz(lo + (hi - lo) * i / (n_mels + 1));
  std::vector<float> fb(static_cast<size_t>(n_mels) * bins, 0.0f);
  for (int m = 0; m < n_mels; ++m) {
    const double left = edges[m], centre = edges[m + 1], right = edges[m + 2];
    for (int k = 0; k < bins; ++k) {
      const double f = static_cast<double>(k) * sample_rate / n_fft;
      double w = 0.0;
      if (f > left && f <= centre) w = (f - left) / (centre - left);
      else if (f > centre && f < right) w = (right - f) / (right - centre);
      fb[static_cast<size_t>(m) * bins + k] = static_cast<float>(w);
    }
  }
  return fb;
}

FeatureExtractor::FeatureExtractor(const ModelConfig& config) : config_(config) {
  if (config_.input != InputKind::kLogMel) return;
  const int bins = config_.n_fft / 2 + 1;
  std::vector<float> fb = mel_filterbank_weights(config_.sample_rate, config_.n_fft, config_.n_mels,
                                                 config_.fmin, config_.fmax);
  mel_fb_ = torch::from_blob(fb.data(), {config_.n_mels, bins}).clone();
  // Each triangle's nonzero bins are one run (zeros inside a run are kept:
  // a narrow low filter may have none at all, and then has an empty run).
  for (int m = 0; m < config_.n_mels; ++m) {
    const float* row = fb.data() + static_cast<size_t>(m) * bins;
    int first = 0, last = -1;
    for (int k = 0; k < bins; ++k) {
      if (row[k] == 0.0f) continue;
      if (last < 0) first = k;
      last = k;
    }
    mel_runs_.push_back({first, last - first + 1, static_cast<int>(mel_weights_.size())});
    mel_weights_.insert(mel_weights_.end(), row + first, row + last + 1);
  }
  const torch::Tensor hann = torch::hann_window(config_.n_fft, torch::TensorOptions().dtype(torch::kFloat32));
  window_.assign(hann.data_ptr<float>(), hann.data_ptr<float>() + config_.n_fft);
  plan_ = make_plan(config_.n_fft);
}

torch::Tensor FeatureExtractor::compute(const std::vector<const float*>& segments) const {
  if (config_.input == InputKind::kLogMel) return log_mel(segments);
  const int64_t batch = static_cast<int64_t>(segments.size());
  const int64_t samples = config_.segment_samples();
  torch::Tensor pcm = torch::empty({batch, samples}, torch::kFloat32);
  float* dst = pcm.data_ptr<float>();
  for (int64_t i = 0; i < batch; ++i) {
    std::memcpy(dst + i * samples, segments[i], sizeof(float) * samples);
  }
  return pcm;
}

torch::Tensor FeatureExtractor::log_mel(const std::vector<const float*>& segments) const {
  const int64_t batch = static_cast<int64_t>(segments.size());
  const int64_t samples = config_.segment_samples();
  const int n_fft = config_.n_fft, hop = config_.hop_length, bins = n_fft / 2 + 1, pad = n_fft / 2;
  const int64_t mels = config_.n_mels, frames = config_.frames_per_segment();
  torch::Tensor out = torch::empty({batch, 1, mels, frames}, torch::kFloat32);
  float* o = out.data_ptr<float>();
  std::vector<float> padded(static_cast<size_t>(samples) + 2 * pad), power(bins);
  FftwBuffer<float> frame(n_fft);
  FftwBuffer<fftwf_complex> spectrum(bins);
  const auto plan = static_cast<fftwf_plan>(plan_.get());
  for (int64_t b = 0; b < batch; ++b) {
    reflect_pad(segments[b], samples, pad, padded.data());
    float* mel_out = o + b * mels * frames;
    const SharedFrames shared = b > 0 ? shared_frames(config_, segments[b - 1], segments[b]) : SharedFrames{};
    for (int64_t t = 0; t < frames; ++t) {
      if (t >= shared.first && t <= shared.last) {
        const float* from = mel_out - mels * frames + t + shared.shift;
        for (int64_t m = 0; m < mels; ++m) mel_out[m * frames + t] = from[m * frames];
        continue;
      }
      const float* x = padded.data() + t * hop;
      for (int n = 0; n < n_fft; ++n) frame.data[n] = x[n] * window_[n];
      fftwf_execute_dft_r2c(plan, frame.data, spectrum.data);
      for (int k = 0; k < bins; ++k) {
        power[k] = spectrum.data[k][0] * spectrum.data[k][0] + spectrum.data[k][1] * spectrum.data[k][1];
      }
      for (int64_t m = 0; m < mels; ++m) {
        const MelRun& r = mel_runs_[m];
        const float* w = mel_weights_.data() + r.offset;
        const float* p = power.data() + r.first;
        float acc = 0.0f;
        for (int i = 0; i < r.count; ++i) acc += w[i] * p[i];
        mel_out[m * frames + t] = acc;
      }
    }
  }
  return out.add_(kLogFloor).log_();
}

}  // namespace corepool
