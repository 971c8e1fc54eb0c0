// corepool-arena-bench: why engine threads allocate from an EngineArena
// (worker/host/engine_arena.h). The optimized model's forward() on one thread at
// batch 1, 2, 4, 8 and 16, its activations once on jemalloc's own arenas under
// corepool's MALLOC_CONF (what every engine did before) and once in an
// EngineArena, in alternating blocks of --block-seconds so that host noise
// hits both. Prints the page faults per call (the pages jemalloc handed back
// between calls and the kernel zeroed again) and the mean ms per item.
// Runs itself on jemalloc (it re-executes as corepool does, allocator.h).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/script.h>

#include "supervisor/pool/allocator.h"
#include "worker/engine.h"
#include "worker/host/engine_arena.h"
#include "worker/model/model.h"
#include "worker/optimize/optimize.h"
#include "worker/runtime.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Tally {
  double ms = 0;
  long faults = 0, calls = 0, items = 0;
};

long thread_faults() {
  rusage r{};
  ::getrusage(RUSAGE_THREAD, &r);
  return r.ru_minflt;
}

// One block: a thread of its own (in an EngineArena or not) runs one warm-up
// call, then calls forward() for `seconds`.
void run_block(const std::shared_ptr<const corepool::LoadedModel>& model, const at::Tensor& input, bool arena,
               double seconds, Tally& tally) {
  std::thread([&] {
    corepool::configure_runtime_threads({1, 1});
    c10::InferenceMode guard;
    std::unique_ptr<corepool::EngineArena> own;
    if (arena) own = std::make_unique<corepool::EngineArena>();
    corepool::Engine engine(model);
    engine.forward(input);
    const auto start = Clock::now();
    while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
      const long f = thread_faults();
      const auto t = Clock::now();
      engine.forward(input);
      tally.ms += std::chrono::duration<double, std::milli>(Clock::now() - t).count();
      tally.faults += thread_faults() - f;
      ++tally.calls;
      tally.items += input.size(0);
    }
  }).join();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"corepool-arena-bench: forward() with its activations on jemalloc's arenas against an EngineArena"};
  std::string model_dir, optimize = "onednn";
  double block_seconds = 1.0;
  int blocks = 3;
  app.add_option("--model", model_dir, "model directory")->required();
  app.add_option("--optimize", optimize, "engine.optimize")->check(CLI::IsMember({"none", "onednn", "onednn-direct", "bf16"}));
  app.add_option("--block-seconds", block_seconds, "seconds per block")->check(CLI::PositiveNumber);
  app.add_option("--blocks", blocks, "blocks per allocator and batch")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const std::string problem = corepool::ensure_allocator("jemalloc", argv);
  if (!problem.empty()) {
    std::fprintf(stderr, "corepool-arena-bench: %s\n", problem.c_str());
    return 1;
  }
  corepool::configure_runtime_threads({1, 1});
  auto model = corepool::load_model(model_dir);
  const corepool::OptimizeOutcome o = corepool::optimize_model(*model, optimize, false);
  std::printf("model %s, optimize %s, one thread, MALLOC_CONF=%s; %d blocks of %.1f s per allocator and batch\n",
              model_dir.c_str(), o.applied.c_str(), std::getenv("MALLOC_CONF") ? std::getenv("MALLOC_CONF") : "",
              blocks, block_seconds);
  std::printf("%5s %18s %16s %18s %16s %8s\n", "batch", "jemalloc faults", "jemalloc ms/item", "EngineArena faults",
              "arena ms/item", "ratio");
  for (int batch : {1, 2, 4, 8, 16}) {
    std::vector<int64_t> shape = model->config.item_shape();
    shape.insert(shape.begin(), batch);
    const at::Tensor input = at::randn(shape);
    Tally plain, arena;
    for (int b = 0; b < blocks; ++b) {
      run_block(model, input, false, block_seconds, plain);
      run_block(model, input, true, block_seconds, arena);
    }
    const double plain_ms = plain.ms / plain.items, arena_ms = arena.ms / arena.items;
    std::printf("%5d %18.0f %16.3f %18.0f %16.3f %8.3f\n", batch, double(plain.faults) / plain.calls, plain_ms,
                double(arena.faults) / arena.calls, arena_ms, arena_ms / plain_ms);
  }
  std::printf("faults: page faults per forward() call; ratio: EngineArena ms per item / jemalloc's\n");
  return 0;
}
