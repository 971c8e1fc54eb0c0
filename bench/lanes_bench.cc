// corepool-lanes-bench: what lanes cost in accuracy and give in speed. A
// stateful model's long file runs as lanes (supervisor/batch/stream_lanes.h),
// each after the first warmed up from a fresh state on lane_warmup_seconds: an
// approximation. This scores each FILE twice through StreamScorer and engine
// threads, once as one exact stream and once in the model's lanes (or
// --lane-seconds / --warmup-seconds), and prints per file the largest
// probability difference, the chunks that differ by more than 0.01, the
// speech events (model.toml's rules) of each run, the seconds where one run
// says speech and the other does not, and both wall times.
// Prints figures; passes or fails on nothing but errors.
//   corepool-lanes-bench --model build/models/silero-vad FILE...
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "audio/audio_stream.h"
#include "audio/speech_events.h"
#include "bench/tool_main.h"
#include "config/config.h"
#include "supervisor/batch/stream_scorer.h"
#include "supervisor/pool/executor_factory.h"
#include "worker/model/model.h"

namespace corepool {
namespace {

struct Run {
  std::vector<float> scores;
  double seconds = 0;
};

Run score(const std::shared_ptr<const LoadedModel>& model, const ModelConfig& config, const Config& cfg,
          const std::shared_ptr<const std::vector<float>>& samples) {
  Run run;
  StreamScorer scorer(config, [&](uint64_t, std::vector<float> s, const std::string& error) {
    if (!error.empty()) throw std::runtime_error(error);
    run.scores = std::move(s);
  });
  auto executor = make_executor_factory(cfg, model)([&](SegmentResult&& r) { scorer.on_complete(std::move(r)); });
  const auto t0 = std::chrono::steady_clock::now();
  scorer.add(0, samples);
  while (scorer.pump(*executor)) {
  }
  executor->wait_idle();
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

std::vector<std::pair<double, double>> spans(const ModelConfig& c, const std::vector<float>& probs, int64_t samples) {
  const auto ms = [&](int v) { return static_cast<int64_t>(v) * c.sample_rate / 1000; };
  const SpeechRules rules{c.thresholds[0], c.rules.hysteresis, ms(c.rules.min_speech_ms), ms(c.rules.min_silence_ms),
                          ms(c.rules.speech_pad_ms)};
  std::vector<std::pair<double, double>> out;
  for (const auto& s : speech_spans(probs, c.stateful.chunk_samples, samples, rules)) {
    out.emplace_back(static_cast<double>(s.start) / c.sample_rate, static_cast<double>(s.end) / c.sample_rate);
  }
  return out;
}

using Spans = std::vector<std::pair<double, double>>;

double total(const Spans& s) {
  double t = 0;
  for (const auto& [a, b] : s) t += b - a;
  return t;
}

// Seconds inside both lists' spans; each list is sorted and non-overlapping.
double overlap(const Spans& x, const Spans& y) {
  double t = 0;
  for (size_t i = 0, j = 0; i < x.size() && j < y.size();) {
    t += std::max(0.0, std::min(x[i].second, y[j].second) - std::max(x[i].first, y[j].first));
    (x[i].second < y[j].second ? i : j)++;
  }
  return t;
}

int run_main(int argc, char** argv) {
  std::string model_dir = "build/models/silero-vad";
  std::vector<std::string> files;
  double lane_seconds = -1, warmup_seconds = -1;
  int workers = 1;
  CLI::App app{"corepool-lanes-bench: a stateful model's lanes against one exact stream per file"};
  app.add_option("--model", model_dir, "a stateful model directory");
  app.add_option("--lane-seconds", lane_seconds, "default: the model's lane_seconds");
  app.add_option("--warmup-seconds", warmup_seconds, "default: the model's lane_warmup_seconds");
  app.add_option("--workers", workers, "engine threads");
  app.add_option("files", files, "audio files")->required();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  auto model = load_model(model_dir);
  if (!model->config.is_stateful()) throw std::runtime_error(model_dir + ": not a stateful model");
  Config cfg;
  cfg.workers = workers;
  cfg.max_batch = model->config.max_batch;
  ModelConfig exact = model->config, lanes = model->config;
  exact.stateful.lane_seconds = 0;
  if (lane_seconds >= 0) lanes.stateful.lane_seconds = lane_seconds;
  if (warmup_seconds >= 0) lanes.stateful.lane_warmup_seconds = warmup_seconds;
  std::printf("lanes of %.1f s, warm-up %.1f s, %d engine thread(s)\n", lanes.stateful.lane_seconds,
              lanes.stateful.lane_warmup_seconds, workers);
  std::printf("%-44s %8s %10s %8s %7s %7s %10s %9s %9s\n", "file", "seconds", "max|diff|", ">0.01", "events",
              "(lanes)", "differ s", "exact s", "lanes s");
  for (const std::string& path : files) {
    auto samples = std::make_shared<std::vector<float>>();
    AudioStream stream(path, model->config.sample_rate);
    while (stream.read(*samples)) {
    }
    const Run a = score(model, exact, cfg, samples), b = score(model, lanes, cfg, samples);
    double worst = 0;
    size_t over = 0;
    for (size_t i = 0; i < a.scores.size(); ++i) {
      const double d = std::abs(static_cast<double>(a.scores[i]) - b.scores[i]);
      worst = std::max(worst, d);
      over += d > 0.01;
    }
    const int64_t n = static_cast<int64_t>(samples->size());
    const Spans sa = spans(exact, a.scores, n), sb = spans(lanes, b.scores, n);
    const double differ = total(sa) + total(sb) - 2 * overlap(sa, sb);  // speech in one run only
    std::string name = path.size() > 44 ? "..." + path.substr(path.size() - 41) : path;
    std::printf("%-44s %8.1f %10.3g %8zu %7zu %7zu %10.2f %9.2f %9.2f\n", name.c_str(),
                n / double(model->config.sample_rate), worst, over, sa.size(), sb.size(), differ, a.seconds, b.seconds);
  }
  return 0;
}

}  // namespace
}  // namespace corepool

int main(int argc, char** argv) {
  return corepool::tool_main("corepool-lanes-bench", corepool::run_main, argc, argv);
}
