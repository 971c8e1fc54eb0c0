// corepool-silero-ceiling: the bare ceiling of a stateful model (Silero VAD's
// inner 16 kHz network), for bench/silero-bench.sh: one thread, a tight loop
// of forward(x [B, context + chunk], state) on the same input, no IPC, no
// decoding, warmed up before the clock. Prints, per batch size and per form of
// the module (as loaded; frozen; frozen + optimize_for_inference), the
// microseconds per chunk and the x real time ONE core can reach, so that
// `corepool batch`'s figure per core can be read against it in the same run.
// A model with a split ([stateful.split]) also gets its split's cost for one
// stream: the front over a batch of that stream's chunks, the sequence along them.
// Prints figures; passes or fails on nothing but errors.
// It runs on jemalloc, as corepool does (--allocator system for glibc's malloc).
//   corepool-silero-ceiling --model build/models/silero-vad [--batches 64,128,256,512] [--seconds 1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/frozen_graph_optimizations.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include "bench/tool_main.h"
#include "supervisor/pool/allocator.h"
#include "worker/model/model.h"
#include "worker/model/torch_module.h"
#include "worker/runtime.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;

// The best of three timed stretches of `call`, which runs `chunks` chunks:
// microseconds per chunk, after a warm-up.
template <typename Call>
double best_us(const Call& call, int64_t chunks, double seconds) {
  for (int i = 0; i < 10; ++i) call();
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    int calls = 0;
    const auto t0 = Clock::now();
    double elapsed = 0;
    while (elapsed < seconds / 3) {
      call();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    best = std::min(best, elapsed * 1e6 / (static_cast<double>(calls) * chunks));
  }
  return best;
}

struct SplitCost {
  double front = 0, sequence = 0;  // us per chunk
};

// ONE stream through a split ([stateful.split]): its front over `batch`
// chunks in one call, and its sequence along them, sequence_chunks a call.
SplitCost split_us_per_chunk(torch::jit::Module& method, const StatefulSpec& s, int64_t batch, double seconds) {
  c10::InferenceMode guard;
  const torch::Tensor x = torch::randn({batch, s.context_samples + s.chunk_samples}) * 0.1;
  torch::jit::Method front = method.get_method(s.split.front), sequence = method.get_method(s.split.sequence);
  const torch::Tensor features = front({x}).toTensor().reshape({batch, s.split.feature_floats}).contiguous();
  std::vector<int64_t> state_shape = s.state_shape;
  state_shape[s.batch_dim()] = 1;
  torch::Tensor state = torch::full(state_shape, s.state_initial);
  SplitCost cost;
  cost.front = best_us([&] { (void)front({x}); }, batch, seconds);
  cost.sequence = best_us(
      [&] {
        for (int64_t c = 0; c < batch; c += s.split.sequence_chunks) {
          const int64_t t = std::min<int64_t>(s.split.sequence_chunks, batch - c);
          state = sequence({features.narrow(0, c, t).unsqueeze(1), state}).toTuple()->elements()[1].toTensor();
        }
      },
      batch, seconds);
  return cost;
}

// The sequence over `streams` streams at once (sequence_chunks each, one
// call): us per chunk of one stream. Many files' sequences batch this way; one
// stream's cannot.
double sequence_us_per_stream_chunk(torch::jit::Method& sequence, const StatefulSpec& s, int64_t streams,
                                    double seconds) {
  c10::InferenceMode guard;
  const torch::Tensor features = torch::randn({s.split.sequence_chunks, streams, s.split.feature_floats});
  std::vector<int64_t> state_shape = s.state_shape;
  state_shape[s.batch_dim()] = streams;
  torch::Tensor state = torch::full(state_shape, s.state_initial);
  return best_us([&] { state = sequence({features, state}).toTuple()->elements()[1].toTensor(); },
                 s.split.sequence_chunks * streams, seconds);
}

// Microseconds per chunk of `method` at `batch`, the best of three timed
// stretches of about `seconds` / 3 each, after a warm-up.
double us_per_chunk(torch::jit::Module& method, const StatefulSpec& s, int64_t batch, double seconds) {
  c10::InferenceMode guard;
  std::vector<int64_t> state_shape = s.state_shape;
  state_shape[s.batch_dim()] = batch;
  const torch::Tensor x = torch::randn({batch, s.context_samples + s.chunk_samples}) * 0.1;
  torch::Tensor state = torch::full(state_shape, s.state_initial);
  return best_us([&] { state = method.forward({x, state}).toTuple()->elements()[1].toTensor(); }, batch, seconds);
}

std::vector<int64_t> parse_batches(const std::string& text) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    out.push_back(std::stoll(text.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

// The split frozen as optimize_model() freezes it, one stream: the cost of
// its front at each batch (chunks of that one stream) and of its sequence.
void print_split(const torch::jit::Module& loaded, const ModelConfig& c, const std::string& batches_text,
                 double seconds) {
  const StatefulSpec& s = c.stateful;
  const double chunk_seconds = static_cast<double>(s.chunk_samples) / c.sample_rate;
  torch::jit::setGraphExecutorOptimize(true);
  const std::vector<std::string> keep{s.split.front, s.split.sequence};
  torch::jit::Module frozen = torch::jit::freeze(loaded.clone(), keep);
  torch::jit::setGraphExecutorOptimize(false);
  std::printf("split, frozen, ONE stream: front over a batch of its chunks, sequence %d chunks a call: us per chunk "
              "(x real time per core)\n%8s %24s %24s %24s\n",
              s.split.sequence_chunks, "batch", "front", "sequence", "both");
  for (const int64_t b : parse_batches(batches_text)) {
    const SplitCost cost = split_us_per_chunk(frozen, s, b, seconds);
    const double both = cost.front + cost.sequence;
    std::printf("%8lld", static_cast<long long>(b));
    for (const double us : {cost.front, cost.sequence, both}) {
      std::printf(" %14.1f us (%6.0fx)", us, chunk_seconds * 1e6 / us);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  std::printf("split, frozen, the sequence over N streams at once (%d chunks each): us per chunk of one stream\n",
              s.split.sequence_chunks);
  torch::jit::Method sequence = frozen.get_method(s.split.sequence);
  for (const int64_t n : {1, 2, 4, 8, 16, 32}) {
    const double us = sequence_us_per_stream_chunk(sequence, s, n, seconds / 3);
    std::printf("%8lld streams %10.2f us (%6.0fx)\n", static_cast<long long>(n), us, chunk_seconds * 1e6 / us);
    std::fflush(stdout);
  }
}

int run_main(int argc, char** argv) {
  std::string model_dir = "build/models/silero-vad", batches_text = "64,128,256,512";
  double seconds = 1.5;
  std::string allocator = "jemalloc";
  CLI::App app{"corepool-silero-ceiling: one thread, tight forward() loop of a stateful model's method"};
  app.add_option("--model", model_dir, "a stateful model directory");
  app.add_option("--batches", batches_text, "batch sizes, comma-separated");
  app.add_option("--seconds", seconds, "timed seconds per batch size and form");
  app.add_option("--allocator", allocator, "jemalloc (as corepool runs) or system")
      ->check(CLI::IsMember({"jemalloc", "system"}));
  CLI11_PARSE(app, argc, argv);
  // On the allocator corepool runs on (and OPENBLAS_NUM_THREADS=1, as there):
  // under glibc's malloc this loop ran 16.3-18.4 us per chunk at batch 128-256,
  // under jemalloc 12.8-14.3 us (AMD EPYC Zen 5), and corepool's one engine at
  // batch 200 ran 13.3: a ceiling below what corepool does is no ceiling.
  if (const std::string problem = ensure_allocator(allocator, argv); !problem.empty()) {
    throw std::runtime_error("cannot run on " + allocator + ": " + problem);
  }
  spdlog::set_level(spdlog::level::warn);
  configure_runtime_threads({1, 1});  // as an engine runs: one thread, the same graph executor settings
  auto model = load_model(model_dir);
  const ModelConfig& c = model->config;
  if (!c.is_stateful()) throw std::runtime_error(model_dir + ": not a stateful model");
  const double chunk_seconds = static_cast<double>(c.stateful.chunk_samples) / c.sample_rate;
  torch::jit::Module loaded = stateful_method(module_of(*model), c.stateful.method, model_dir);
  // freeze() inlines the submodules' calls only with the graph executor's
  // optimisation on, which configure_runtime_threads turned off for running.
  torch::jit::setGraphExecutorOptimize(true);
  torch::jit::Module frozen = torch::jit::freeze(loaded.clone());
  torch::jit::Module frozen_copy = torch::jit::freeze(loaded.clone());
  torch::jit::Module optimized = torch::jit::optimize_for_inference(frozen_copy);
  torch::jit::setGraphExecutorOptimize(false);
  struct Form {
    const char* name;
    torch::jit::Module* module;
  };
  const Form forms[] = {{"as loaded", &loaded}, {"frozen", &frozen}, {"frozen+optimize_for_inference", &optimized}};
  std::printf("ceiling, 1 thread, %s, %s.%s: us per chunk (x real time per core)\n", allocator_in_use().c_str(),
              model_dir.c_str(), c.stateful.method.c_str());
  std::printf("%8s", "batch");
  for (const Form& f : forms) std::printf(" %32s", f.name);
  std::printf("\n");
  for (const int64_t b : parse_batches(batches_text)) {
    std::printf("%8lld", static_cast<long long>(b));
    for (const Form& f : forms) {
      const double us = us_per_chunk(*f.module, c.stateful, b, seconds);
      std::printf(" %17.1f us (%6.0fx)", us, chunk_seconds * 1e6 / us);
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  if (c.stateful.split.enabled()) print_split(loaded, c, batches_text, seconds);
  return 0;
}

}  // namespace
}  // namespace corepool

int main(int argc, char** argv) {
  return corepool::tool_main("corepool-silero-ceiling", corepool::run_main, argc, argv);
}
