// corepool-features-bench: the log-mel step of the pipeline, one thread, as
// corepool computes it (FeatureExtractor: FFTW per frame, sparse mel filters)
// against the same features through LibTorch's ops (stft, abs, square, a
// dense filterbank matmul, log: corepool's path before 2026-11-27). Prints the
// best of --reps calls per batch size and the largest difference between the
// two on noise, in ln units. "stream" is a batch of one stream's consecutive
// segments (hop_seconds apart, so they overlap): the frames they share are
// computed once. Run it under the allocator corepool runs with
// (bench-all preloads jemalloc): glibc's malloc maps and unmaps LibTorch's
// large intermediate tensors on every call, which makes its ops look slower.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>

#include <CLI/CLI.hpp>
#include <torch/script.h>

#include "bench/best_ms.h"
#include "config/model_config.h"
#include "worker/features.h"
#include "worker/runtime.h"

namespace {

// The reference: LibTorch's ops over the whole batch.
torch::Tensor torch_log_mel(const corepool::ModelConfig& cfg, const torch::Tensor& pcm, const torch::Tensor& window,
                            const torch::Tensor& mel_fb) {
  const torch::Tensor spec = torch::stft(pcm, cfg.n_fft, cfg.hop_length, cfg.n_fft, window, /*center=*/true,
                                         "reflect", /*normalized=*/false, /*onesided=*/true, /*return_complex=*/true);
  const torch::Tensor power = spec.abs().square_();
  return torch::matmul(mel_fb, power).add_(1e-6).log_().unsqueeze(1);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"corepool-features-bench: log-mel per batch, corepool's FeatureExtractor against LibTorch's ops"};
  std::string model_toml = "build/models/cnn10/model.toml";
  int reps = 200;
  app.add_option("--model-toml", model_toml, "the model contract whose [features] to compute")->check(CLI::ExistingFile);
  app.add_option("--reps", reps, "calls per figure (the best is printed)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  corepool::configure_runtime_threads({1, 1});
  c10::InferenceMode guard;
  const corepool::ModelConfig cfg = corepool::load_model_config(model_toml);
  if (cfg.input != corepool::InputKind::kLogMel) {
    std::fprintf(stderr, "%s: the model takes a waveform, it has no log-mel step\n", model_toml.c_str());
    return 2;
  }
  const corepool::FeatureExtractor features(cfg);
  const torch::Tensor window = torch::hann_window(cfg.n_fft);
  std::printf("%s: %d Hz, %.2f s segments, n_fft %d, hop %d, %d mels; one thread, best of %d calls\n",
              model_toml.c_str(), cfg.sample_rate, cfg.segment_seconds, cfg.n_fft, cfg.hop_length, cfg.n_mels, reps);
  const char* preload = std::getenv("LD_PRELOAD");
  std::printf("malloc: %s\n", preload && *preload ? preload : "glibc's (nothing preloaded)");
  std::printf("%6s %22s %22s %9s %14s %18s %9s %14s\n", "batch", "LibTorch ops ms/seg", "FeatureExtractor ms/seg",
              "speed-up", "max |diff| ln", "stream ms/seg", "speed-up", "max |diff| ln");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> noise(-1.0f, 1.0f);
  for (int64_t batch : {1, 4, 16}) {
    const torch::Tensor pcm = torch::empty({batch, cfg.segment_samples()});
    std::generate(pcm.data_ptr<float>(), pcm.data_ptr<float>() + pcm.numel(), [&] { return noise(rng); });
    std::vector<const float*> rows;
    for (int64_t b = 0; b < batch; ++b) rows.push_back(pcm.data_ptr<float>() + b * cfg.segment_samples());
    const double diff =
        (features.compute(rows) - torch_log_mel(cfg, pcm, window, features.mel_filterbank())).abs().max().item<double>();
    const double ops = corepool::best_ms([&] { (void)torch_log_mel(cfg, pcm, window, features.mel_filterbank()); }, reps);
    const double ours = corepool::best_ms([&] { (void)features.compute(rows); }, reps);
    // The same noise as one stream: item b starts hop_samples after item b-1.
    std::vector<const float*> stream_rows;
    for (int64_t b = 0; b < batch; ++b) stream_rows.push_back(pcm.data_ptr<float>() + b * cfg.hop_samples());
    const torch::Tensor stream_pcm =
        pcm.flatten().as_strided({batch, cfg.segment_samples()}, {cfg.hop_samples(), 1}).contiguous();
    const double stream_diff = (features.compute(stream_rows) -
                                torch_log_mel(cfg, stream_pcm, window, features.mel_filterbank()))
                                   .abs().max().item<double>();
    const double stream = corepool::best_ms([&] { (void)features.compute(stream_rows); }, reps);
    std::printf("%6lld %22.4f %22.4f %8.2fx %14.2e %18.4f %8.2fx %14.2e\n", static_cast<long long>(batch), ops / batch,
                ours / batch, ops / ours, diff, stream / batch, ops / stream, stream_diff);
  }
  return 0;
}
