// Both measurements process the same number of segments of the same generated
// audio with the same thread count, pinning and batch size; they alternate so
// that drift (thermal, noisy neighbours) hits both alike. Reported figures are
// medians; the ratio is thread mode / ceiling.
#include "supervisor/bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <vector>

#include "supervisor/batch.h"
#include "tools/audio_synth.h"
#include "worker/audio_stream.h"
#include "worker/cpus.h"
#include "worker/engine.h"
#include "worker/segmenter.h"
#include "worker/thread_executor.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The first `count` segments of the file, as the ceiling's fixed inputs.
std::vector<std::vector<float>> first_segments(const std::string& path, const ModelConfig& cfg, size_t count) {
  AudioStream stream(path, cfg.sample_rate);
  Segmenter segmenter(cfg.segment_samples(), cfg.hop_samples());
  std::vector<std::vector<float>> out;
  std::vector<float> block;
  Segment s;
  while (out.size() < count && stream.read(block)) {
    segmenter.push(block.data(), block.size());
    block.clear();
    while (out.size() < count && segmenter.next(s)) out.push_back(std::move(s.samples));
  }
  return out;
}

// N pinned threads, each with its own Engine over the shared weights, run
// forward() on one precomputed feature batch until `segments` are done in total.
double ceiling_rate(const std::shared_ptr<const LoadedModel>& model, const std::vector<int>& cpus,
                    int threads, const std::vector<std::vector<float>>& inputs, uint64_t segments) {
  const uint64_t batch = inputs.size();
  const uint64_t per_thread = (segments / threads + batch - 1) / batch;  // forwards per thread
  std::vector<std::thread> pool;
  const auto start = Clock::now();
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      if (!cpus.empty()) pin_current_thread(cpus[i % cpus.size()]);
      Engine engine(model);
      std::vector<const float*> ptrs;
      for (const auto& v : inputs) ptrs.push_back(v.data());
      torch::Tensor features = engine.features(ptrs);
      for (uint64_t k = 0; k < per_thread; ++k) engine.forward(features);
    });
  }
  for (auto& t : pool) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  return static_cast<double>(per_thread * batch * threads) / wall;
}

double pipeline_rate(const std::shared_ptr<const LoadedModel>& model, const ThreadExecutorOptions& opts,
                     const std::string& audio, const std::string& out_dir, uint64_t* segments) {
  BatchOptions batch;
  batch.paths = {audio};
  batch.out_dir = out_dir;
  batch.force = true;
  BatchStats stats = run_batch(batch, model->config, [&](Executor::Completion done) {
    return std::make_unique<ThreadExecutor>(model, opts, std::move(done));
  });
  if (stats.files_ok != 1) throw std::runtime_error("bench: the pipeline run failed");
  *segments = stats.segments;
  return static_cast<double>(stats.segments) / stats.wall_seconds;
}

}  // namespace

int run_bench(const BenchOptions& options) {
  auto model = load_model(options.model_dir);
  const CpuBudget budget = usable_cpus();
  const int threads = options.workers > 0 ? options.workers : budget.usable;
  const std::vector<int> cpus = options.pin ? budget.allowed : std::vector<int>{};

  char tmpl[] = "/tmp/corepool-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("bench: cannot create a temp dir");
  const std::string dir = tmpl;
  synth::FileSpec spec = synth::demo_spec();
  spec.sample_rate = model->config.sample_rate;
  spec.repeat = std::max(1, static_cast<int>(options.audio_seconds / synth::duration_seconds(spec) + 0.5));
  const std::string audio = dir + "/bench.wav";
  synth::write_audio(audio, spec);

  ThreadExecutorOptions opts{threads, options.max_batch, 0, cpus};
  const auto inputs = first_segments(audio, model->config, options.max_batch);
  std::printf("corepool bench: model %s, %d engine thread(s), max batch %d, %.0f s of audio, %d repeats\n",
              options.model_dir.c_str(), threads, options.max_batch, synth::duration_seconds(spec),
              options.repeats);
  uint64_t segments = 0;
  pipeline_rate(model, opts, audio, dir + "/out", &segments);  // warm-up, also counts segments
  std::vector<double> ceiling, pipeline;
  for (int r = 0; r < options.repeats; ++r) {
    ceiling.push_back(ceiling_rate(model, cpus, threads, inputs, segments));
    pipeline.push_back(pipeline_rate(model, opts, audio, dir + "/out", &segments));
    std::printf("  repeat %d: ceiling %.1f seg/s, thread mode %.1f seg/s\n", r + 1, ceiling.back(),
                pipeline.back());
  }
  const double c = median(ceiling), p = median(pipeline);
  const double realtime = p * model->config.hop_seconds;  // audio seconds per wall second
  std::printf("\n%-34s %12s %12s\n", "configuration", "segments/s", "x-real-time");
  std::printf("%-34s %12.1f %12.1f\n", "bare ceiling (forward loops)", c, c * model->config.hop_seconds);
  std::printf("%-34s %12.1f %12.1f\n", "thread mode (full pipeline)", p, realtime);
  std::printf("\nthread mode reaches %.3f of the ceiling at %d engine thread(s)\n", p / c, threads);
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace corepool
