// Freeze + optimize_for_inference, checked against the module as loaded on a
// fixed random batch before it replaces it. With `shared`, the whole of it runs
// inside a WeightArena::Scope: the clone's weights, the folded constants and
// oneDNN's prepacked blocks are all allocated in the arena, and the
// temporaries' pages go back to the kernel as they are freed.
#include "worker/optimize/optimize.h"

#include <chrono>
#include <optional>
#include <stdexcept>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/frozen_graph_optimizations.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <spdlog/spdlog.h>

#include "worker/optimize/linear_rewrite.h"
#include "worker/model/torch_module.h"
#include "worker/kernels/kernel_path.h"
#include "worker/kernels/winograd_calibrate.h"
#include "worker/kernels/winograd_conv.h"
#include "worker/optimize/winograd_rewrite.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;

// `items` items of the model's input, the same every run for one seed.
torch::Tensor random_batch(const ModelConfig& config, int64_t items, uint64_t seed) {
  std::vector<int64_t> shape = config.item_shape();
  shape.insert(shape.begin(), items);
  auto gen = at::detail::createCPUGenerator(seed);
  return torch::randn(shape, gen);
}

// The check: two items. The Winograd chunk calibration: as many as a chunk can hold.
torch::Tensor check_batch(const ModelConfig& config) { return random_batch(config, 2, 20261124); }
torch::Tensor chunk_batch(const ModelConfig& config) {
  return random_batch(config, WinogradConv::kMaxChunk, 20261126);
}

// bf16: every 4-d weight channels-last (NHWC). LibTorch 1.13's prepacking
// (optimize_for_inference) is fp32-only, so bf16 convolutions run as
// aten::conv2d, which follows its weight's memory format: oneDNN's AMX and
// AVX512_BF16 kernels work on NHWC, and an NCHW weight makes every call reorder
// its activations in and out. CNN10 on a Xeon with AMX, 2 workers: 2.97x ->
// 4.73x `plain` (bench/RESULTS.md).
void weights_channels_last(torch::jit::Module& module) {
  torch::NoGradGuard no_grad;
  auto channels_last = [](torch::Tensor t) {
    if (t.dim() == 4) t.set_data(t.contiguous(at::MemoryFormat::ChannelsLast));
  };
  for (const torch::Tensor& p : module.parameters()) channels_last(p);
  for (const torch::Tensor& b : module.buffers()) channels_last(b);
}

torch::Tensor run(torch::jit::Module& module, const torch::Tensor& input) {
  c10::InferenceMode guard;
  return module.forward({input}).toTensor().to(torch::kFloat32);
}

// The optimized module, or throws (c10::Error, std::exception) with the reason.
// With `own_layers`, corepool's layers replace LibTorch's where they
// can, on the `kernels` path: `rewrite` gets how many convolutions run as
// Winograd (winograd_rewrite.h), `linear` how many linear layers run on
// prepacked weights (linear_rewrite.h).
torch::jit::Module optimized_module(const torch::jit::Module& loaded, bool bf16, bool own_layers, KernelPath kernels,
                                    WinogradRewrite& rewrite, LinearRewrite& linear) {
  torch::jit::Module copy = loaded.clone();  // deep: the loaded module stays as it is
  if (bf16) {
    copy.to(at::kBFloat16);
    weights_channels_last(copy);
  }
  torch::jit::Module frozen = torch::jit::freeze(copy);
  rewrite = own_layers ? rewrite_winograd(frozen, kernels) : WinogradRewrite{};
  linear = own_layers ? rewrite_linear(frozen, kernels) : LinearRewrite{};
  return torch::jit::optimize_for_inference(frozen);
}

// Arena room for the clone, the frozen copy, folded and prepacked weights and
// the check's activations; address space only, so generous costs nothing.
size_t arena_capacity(const LoadedModel& model) { return 6 * model.weight_bytes + (512u << 20); }

}  // namespace

double optimize_tolerance(const std::string& mode) { return mode == "bf16" ? 0.05 : 1e-5; }

namespace {

// The path the rewritten layers run on: the one asked for, or under auto the
// ones this CPU picked ("onednn", "corepool", "corepool+onednn", ...); "torch"
// when no layer was rewritten.
std::string kernels_used(KernelPath requested, const WinogradRewrite& w, const LinearRewrite& l) {
  if (w.winograd + w.direct + w.own + l.total() == 0) return kernel_path_name(KernelPath::kTorch);
  if (requested != KernelPath::kAuto) return kernel_path_name(requested);
  std::string names;
  const auto add = [&](bool used, const char* name) {
    if (used) names += (names.empty() ? "" : "+") + std::string(name);
  };
  add(w.winograd + w.direct + l.onednn > 0, "onednn");
  add(w.own - w.own_portable + l.packed > 0, "corepool");
  add(w.own_portable > 0, "portable");
  return names;
}

// The Winograd layers' chunk sizes: `given` when it has one per layer, else
// measured (calibrate_winograd_chunks).
std::vector<int64_t> winograd_chunks_of(torch::jit::Module& optimized, const LoadedModel& model,
                                        const std::vector<int64_t>& given) {
  const auto layers = winograd_layers_of(optimized);
  if (!given.empty() && given.size() == layers.size()) {
    for (size_t i = 0; i < layers.size(); ++i) layers[i]->set_chunk(given[i]);
    return given;
  }
  if (!given.empty()) {
    spdlog::warn("{}: {} Winograd chunk sizes given for {} layers; measuring them instead", model.dir, given.size(),
                 layers.size());
  }
  return calibrate_winograd_chunks(optimized, layers, chunk_batch(model.config));
}

// One attempt: the optimized module, checked against the module as loaded on
// the check batch; throws with the reason it cannot be used. Records the
// check's difference and the counts of corepool's own layers in `out`.
torch::jit::Module checked_module(const LoadedModel& model, const std::string& mode, bool own_layers,
                                  KernelPath kernels, WeightArena* arena, const std::vector<int64_t>& chunks,
                                  OptimizeOutcome& out) {
  TorchModule& torch = torch_of(model);
  const bool bf16 = mode == "bf16";
  torch::jit::Module optimized;
  {
    std::optional<WeightArena::Scope> scope;
    if (arena) scope.emplace(*arena);
    WinogradRewrite rewrite;
    LinearRewrite linear;
    optimized = optimized_module(torch.module, bf16, own_layers, kernels, rewrite, linear);
    out.linear_layers = linear.total();
    out.kernels = kernels_used(kernels, rewrite, linear);
    out.winograd_layers = rewrite.winograd;
    out.direct_blocked_layers = rewrite.direct;
    out.own_winograd_layers = rewrite.own;
    out.own_pooled_layers = rewrite.own_pooled;
    const torch::Tensor input = check_batch(model.config);
    const torch::Tensor want = run(torch.module, input);
    // The first forward also makes whatever the module caches lazily (oneDNN's
    // prepacked and Winograd-transformed weights): in the arena too.
    const torch::Tensor got = run(optimized, bf16 ? input.to(at::kBFloat16) : input);
    if (got.sizes() != want.sizes()) throw std::runtime_error("the optimized module's output has another shape");
    out.max_difference = (got - want).abs().max().item<double>();
  }
  if (!(out.max_difference <= optimize_tolerance(mode))) {
    throw std::runtime_error("its scores differ from the module as loaded by " + std::to_string(out.max_difference) +
                             " (tolerance " + std::to_string(optimize_tolerance(mode)) + ")");
  }
  // Outside the arena scope: the calibration's activations are transient, and
  // every weight layout it uses was transformed by the check above.
  if (out.winograd_layers > 0) out.winograd_chunks = winograd_chunks_of(optimized, model, chunks);
  return optimized;
}

// A stateful model runs a submodule's method, which freezing the top level
// would drop: the method alone is frozen (its submodules' calls inlined, its
// weights folded into constants), checked on two streams' chunk and state
// against the method as loaded, and becomes the module
// (TorchModule::method_is_module). Nothing more: optimize_for_inference's
// prepacking was no faster on Silero VAD's inner network, and its LSTM cell
// has no layer of ours (bench/silero_ceiling.cc measures all three forms).
// freeze() inlines the submodules' calls only with the graph executor's
// optimisation on, which configure_runtime_threads() turns off for running
// (a per-thread setting): on while freezing, then back.
torch::jit::Module frozen_stateful_method(const LoadedModel& model, WeightArena* arena, OptimizeOutcome& out) {
  const StatefulSpec& s = model.config.stateful;
  torch::jit::Module loaded = stateful_method(torch_of(model).module, s.method, model.dir);
  torch::jit::Module frozen;
  std::optional<WeightArena::Scope> scope;
  if (arena) scope.emplace(*arena);
  struct ExecutorOptimizeOn {
    bool was = torch::jit::getGraphExecutorOptimize();
    ExecutorOptimizeOn() { torch::jit::setGraphExecutorOptimize(true); }
    ~ExecutorOptimizeOn() { torch::jit::setGraphExecutorOptimize(was); }
  };
  // A split's front and sequence methods are frozen with it (and run as frozen).
  c10::optional<std::vector<std::string>> keep;
  if (s.split.enabled()) keep = std::vector<std::string>{s.split.front, s.split.sequence};
  {
    const ExecutorOptimizeOn on;
    frozen = torch::jit::freeze(loaded.clone(), keep);
  }
  std::vector<int64_t> state_shape = s.state_shape;
  state_shape[s.batch_dim()] = 2;
  auto gen = at::detail::createCPUGenerator(20261129);
  const torch::Tensor x = torch::randn({2, s.context_samples + s.chunk_samples}, gen) * 0.1;
  const torch::Tensor state = torch::randn(state_shape, gen) * 0.1;
  c10::InferenceMode guard;
  const auto want = loaded.forward({x, state}).toTuple();
  const auto got = frozen.forward({x, state}).toTuple();
  out.max_difference = 0;
  for (const int i : {s.score_output, s.state_output}) {
    const torch::Tensor a = want->elements().at(i).toTensor(), b = got->elements().at(i).toTensor();
    if (a.sizes() != b.sizes()) throw std::runtime_error("the frozen method's output " + std::to_string(i) +
                                                         " has another shape");
    out.max_difference = std::max(out.max_difference, (a - b).abs().max().item<double>());
  }
  if (!(out.max_difference <= optimize_tolerance("onednn"))) {
    throw std::runtime_error("the frozen method's outputs differ from the method as loaded by " +
                             std::to_string(out.max_difference));
  }
  return frozen;
}

std::string reason_of(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

// The mode's module; "onednn" first tries corepool's own layers (Winograd,
// prepacked linear) on the `kernels` path, then LibTorch's alone (then
// `winograd_fallback` says why, and applied is onednn-direct).
torch::jit::Module mode_module(const LoadedModel& model, const std::string& mode, KernelPath kernels,
                               WeightArena* arena, const std::vector<int64_t>& chunks, OptimizeOutcome& out) {
  if (mode != "onednn" || kernels == KernelPath::kTorch) {
    return checked_module(model, mode, false, kernels, arena, chunks, out);
  }
  try {
    return checked_module(model, mode, true, kernels, arena, chunks, out);
  } catch (const std::exception& e) {
    out.winograd_fallback = reason_of(e);
    out.clear_own_layers();
    out.applied = "onednn-direct";
    return checked_module(model, "onednn-direct", false, kernels, arena, chunks, out);
  }
}

// The path engine.kernels names; std::invalid_argument naming the key for an
// unknown one, or one this CPU cannot run (under engine.optimize = "onednn",
// the only mode that uses it).
KernelPath checked_kernel_path(const std::string& kernels, const std::string& mode) {
  const std::optional<KernelPath> path = parse_kernel_path(kernels);
  std::string allowed;
  for (const std::string& name : kernel_path_names()) allowed += (allowed.empty() ? "" : ", ") + name;
  if (!path) throw std::invalid_argument("engine.kernels: unknown path \"" + kernels + "\" (one of " + allowed + ")");
  if (const std::string why = kernel_path_unavailable(*path); mode == "onednn" && !why.empty()) {
    allowed.clear();
    for (KernelPath p : runnable_kernel_paths()) {
      allowed += (allowed.empty() ? "" : ", ") + std::string(kernel_path_name(p));
    }
    throw std::invalid_argument("engine.kernels = \"" + kernels + "\" cannot run here: " + why + " (this CPU runs " +
                                allowed + ")");
  }
  return *path;
}

}  // namespace

OptimizeOutcome optimize_model(const LoadedModel& model, const std::string& mode, bool shared,
                               const std::vector<int64_t>& winograd_chunks, const std::string& kernels) {
  TorchModule& torch = torch_of(model);
  OptimizeOutcome out;
  out.requested = mode;
  out.kernels_requested = kernels;
  out.applied = torch.optimized;
  if (mode == "none" || torch.optimized != "none") return out;
  if (mode != "onednn" && mode != "onednn-direct" && mode != "bf16") {
    throw std::invalid_argument("engine.optimize: unknown mode " + mode);
  }
  // A stateful model: its method frozen (frozen_stateful_method), under
  // onednn or onednn-direct; bf16 leaves it as loaded (its weights are still
  // shared read-only).
  if (model.config.is_stateful() && mode == "bf16") return out;
  const KernelPath path = checked_kernel_path(kernels, mode);
  const auto started = Clock::now();
  std::shared_ptr<WeightArena> arena = shared ? WeightArena::create(arena_capacity(model)) : nullptr;
  try {
    const bool stateful = model.config.is_stateful();
    out.applied = stateful ? "frozen" : mode;
    torch::jit::Module optimized = stateful ? frozen_stateful_method(model, arena.get(), out)
                                            : mode_module(model, mode, path, arena.get(), winograd_chunks, out);
    if (stateful) out.clear_own_layers();
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
    torch.optimized = out.applied;
    torch.input_dtype = mode == "bf16" ? at::kBFloat16 : at::kFloat;
    torch.method_is_module = stateful;
  } catch (const std::exception& e) {
    out.applied = "none";
    out.clear_own_layers();
    out.fallback = reason_of(e);
  }
  // After a fallback the arena is kept too (unsealed, unused): something the
  // failed attempt cached may still point into it.
  if (!out.fallback.empty() && arena) torch.arena = arena;
  out.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return out;
}

}  // namespace corepool
