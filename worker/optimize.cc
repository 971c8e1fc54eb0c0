// Freeze + optimize_for_inference, checked against the module as loaded on a
// fixed random batch before it replaces it. With `shared`, the whole of it runs
// inside a WeightArena::Scope: the clone's weights, the folded constants and
// oneDNN's prepacked blocks are all allocated in the arena, and the
// temporaries' pages go back to the kernel as they are freed.
#include "worker/optimize.h"

#include <chrono>
#include <optional>
#include <stdexcept>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/frozen_graph_optimizations.h>

#include "worker/torch_module.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;

// Two items of the model's input, the same every run.
torch::Tensor check_batch(const ModelConfig& config) {
  std::vector<int64_t> shape = config.item_shape();
  shape.insert(shape.begin(), 2);
  auto gen = at::detail::createCPUGenerator(20261124);
  return torch::randn(shape, gen);
}

torch::Tensor run(torch::jit::Module& module, const torch::Tensor& input) {
  c10::InferenceMode guard;
  return module.forward({input}).toTensor().to(torch::kFloat32);
}

// The optimized module, or throws (c10::Error, std::exception) with the reason.
torch::jit::Module optimized_module(const torch::jit::Module& loaded, bool bf16) {
  torch::jit::Module copy = loaded.clone();  // deep: the loaded module stays as it is
  if (bf16) copy.to(at::kBFloat16);
  torch::jit::Module frozen = torch::jit::freeze(copy);
  return torch::jit::optimize_for_inference(frozen);
}

// Arena room for the clone, the frozen copy, folded and prepacked weights and
// the check's activations; address space only, so generous costs nothing.
size_t arena_capacity(const LoadedModel& model) { return 6 * model.weight_bytes + (512u << 20); }

}  // namespace

double optimize_tolerance(const std::string& mode) { return mode == "bf16" ? 0.05 : 1e-5; }

OptimizeOutcome optimize_model(const LoadedModel& model, const std::string& mode, bool shared) {
  TorchModule& torch = torch_of(model);
  OptimizeOutcome out{mode, torch.optimized, "", 0, 0, 0};
  if (mode == "none" || torch.optimized != "none") return out;
  if (mode != "onednn" && mode != "bf16") throw std::invalid_argument("engine.optimize: unknown mode " + mode);
  const auto started = Clock::now();
  const bool bf16 = mode == "bf16";
  std::shared_ptr<WeightArena> arena = shared ? WeightArena::create(arena_capacity(model)) : nullptr;
  try {
    torch::jit::Module optimized;
    {
      std::optional<WeightArena::Scope> scope;
      if (arena) scope.emplace(*arena);
      optimized = optimized_module(torch.module, bf16);
      const torch::Tensor input = check_batch(model.config);
      const torch::Tensor want = run(torch.module, input);
      // The first forward also makes whatever the module caches lazily: in the arena too.
      const torch::Tensor got = run(optimized, bf16 ? input.to(at::kBFloat16) : input);
      if (got.sizes() != want.sizes()) throw std::runtime_error("the optimized module's output has another shape");
      out.max_difference = (got - want).abs().max().item<double>();
    }
    if (!(out.max_difference <= optimize_tolerance(mode))) {
      throw std::runtime_error("its scores differ from the module as loaded by " +
                               std::to_string(out.max_difference) + " (tolerance " +
                               std::to_string(optimize_tolerance(mode)) + ")");
    }
    if (arena) {
      if (arena->overflow_bytes() > 0) {
        throw std::runtime_error(std::to_string(arena->overflow_bytes()) + " bytes did not fit the weight arena");
      }
      if (const int rc = arena->seal(); rc != 0) throw std::runtime_error("cannot seal the weight arena");
      out.shared_bytes = arena->live_bytes();
      out.huge_pages = arena->huge_pages();
    }
    // The arena first: the old module's tensors are on the heap, the new one's in the arena.
    torch.arena = arena;
    torch.module = optimized;
    torch.optimized = mode;
    torch.input_dtype = bf16 ? at::kBFloat16 : at::kFloat;
    out.applied = mode;
  } catch (const c10::Error& e) {
    out.fallback = e.what_without_backtrace();
  } catch (const std::exception& e) {
    out.fallback = e.what();
  }
  // After a fallback the arena is kept too (unsealed, unused): something the
  // failed attempt cached may still point into it.
  if (!out.fallback.empty() && arena) torch.arena = arena;
  out.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return out;
}

}  // namespace corepool
