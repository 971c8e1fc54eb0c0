// engine.optimize: the model as the CPU runs it fastest, made once per loaded
// model before any engine or worker exists. "onednn-direct" freezes the module
// (parameters become constants, conv/linear + batch-norm fold) and runs
// LibTorch's optimize_for_inference (oneDNN weight prepacking); "onednn" (the
// default) also runs every 3x3 convolution it can as Winograd (oneDNN's on
// AVX-512, else corepool's own F(4x4, 3x3): winograd_rewrite.h) and every
// linear layer on prepacked weights (oneDNN's inner product on AVX-512, else
// corepool's own kernel: linear_rewrite.h), falling back to onednn-direct if
// that fails its check; engine.kernels picks one of those paths instead of
// the CPU's choice (kernel_path.h), or none ("torch");
// "bf16" is onednn-direct after converting the weights to bfloat16. Called by the executor
// factory; in process mode with `shared`, so the result lives in a WeightArena.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "worker/model/model.h"

namespace corepool {

struct OptimizeOutcome {
  std::string requested;   // none | onednn | onednn-direct | bf16
  std::string applied;     // what the module now is ("frozen": a stateful model's method); "none" after a fallback
  std::string fallback;    // why `requested` was not applied ("" if it was)
  std::string kernels_requested = "auto";  // engine.kernels (worker/kernels/kernel_path.h)
  // The path corepool's layers run on: "onednn", "corepool", "portable", under
  // auto the ones picked ("corepool+onednn"), "torch" when none was rewritten.
  std::string kernels = "torch";
  int winograd_layers = 0;        // convolutions run as Winograd (onednn only)
  int direct_blocked_layers = 0;  // ... and from plain input into their blocked layout (winograd_conv.h)
  int own_winograd_layers = 0;    // convolutions run as corepool's own Winograd (winograd_f43.h; no oneDNN Winograd here)
  int own_pooled_layers = 0;      // ... of which with their 2x2 average pool fused
  std::vector<int64_t> winograd_chunks;  // items per oneDNN call, per layer of both kinds (measured)
  int linear_layers = 0;          // linear layers on prepacked weights (onednn only; linear_rewrite.h)
  std::string winograd_fallback;  // why onednn fell back to LibTorch's layers alone ("" if not)
  double seconds = 0;      // time spent optimizing (and checking)
  double max_difference = 0;  // |optimized - as loaded| on the check batch
  // Forgets corepool's own layers (after a fallback to LibTorch's alone).
  void clear_own_layers() {
    winograd_layers = direct_blocked_layers = own_winograd_layers = own_pooled_layers = linear_layers = 0;
    kernels = "torch";
    winograd_chunks.clear();
  }
  size_t shared_bytes = 0;    // live bytes in the weight arena (shared only)
  bool huge_pages = false;    // the arena is in transparent huge pages (weight_arena.h)
};

// Replaces the module of `model` by its optimized form, in place: every holder
// of the LoadedModel (and every Engine made afterwards) runs the new one. Never
// throws for a model that cannot be optimized: it keeps the module as loaded
// and says why in `fallback` (the caller logs a WARN). A second call for an
// already-optimized model changes nothing. Runs LibTorch ops in the calling
// thread: in process mode the caller must hold this process to one thread
// (no OpenMP pool may exist at fork).
// With `shared`, every tensor the optimization allocates (and the module's
// constants) goes to a new WeightArena, sealed read-only before returning.
// `winograd_chunks`, when it holds one size per Winograd layer (graph order, as
// OptimizeOutcome reports them), is set instead of measured: bench runs every
// point at the chunks measured once for its sweep, as at its batch, so that a
// mode and its ceiling run the same kernels (each measuring its own picked
// differently in different processes). Another count is logged and measured.
// `kernels` (engine.kernels) picks the path of corepool's layers under
// "onednn"; an unknown path, or one this CPU cannot run, throws
// std::invalid_argument naming the key (as an unknown mode does).
OptimizeOutcome optimize_model(const LoadedModel& model, const std::string& mode, bool shared,
                               const std::vector<int64_t>& winograd_chunks = {},
                               const std::string& kernels = "auto");

// The tolerance an optimized module must meet against the module as loaded on
// the check batch, else it falls back: fp32 1e-5 (as the issue asks: the
// same scores), bf16 0.05 (bfloat16 keeps 8 bits of mantissa).
double optimize_tolerance(const std::string& mode);

}  // namespace corepool
