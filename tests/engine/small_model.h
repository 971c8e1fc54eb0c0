// A small generated model (width 8: fast forward()s, the same contract as the
// default) for the engine tests that need a real model but not CNN10's cost.
// Written into the test's own temp dir by the real corepool-gen-model.
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include <torch/script.h>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "worker/model/model.h"

namespace corepool::testing {

inline std::string small_model_dir(const TempDir& dir) {
  auto gen = run_process({COREPOOL_GEN_MODEL_BIN, "--out", dir / "model", "--width", "8"}, dir.path());
  if (gen.exit_code != 0) throw std::runtime_error("corepool-gen-model failed: " + gen.err);
  return dir / "model";
}

inline std::shared_ptr<const LoadedModel> small_model(const TempDir& dir) { return load_model(small_model_dir(dir)); }

// The small model's model.toml with a forward() that raises on more than
// `limit` items (and answers zeros otherwise): it shows which batch sizes an
// engine runs, independently of the engine's own accounting.
inline std::string batch_limited_model_dir(const TempDir& dir, int limit) {
  const std::string small = small_model_dir(dir);
  const std::string out = dir / "batch-limited";
  std::filesystem::create_directories(out);
  std::filesystem::copy_file(small + "/model.toml", out + "/model.toml");
  torch::jit::Module m("BatchLimited");
  m.register_attribute("limit", c10::IntType::get(), limit);
  m.define(
      "def forward(self, x):\n"
      "    assert x.size(0) <= self.limit, 'more items than the limit'\n"
      "    return torch.zeros([x.size(0), 4])\n");
  m.save(out + "/model.pt");
  return out;
}

// The small model's model.toml with a forward() that counts its calls: it
// answers, for every item, the number of forward()s so far (this one
// included) and the largest batch among them, then zeros.
inline std::string call_counting_model_dir(const TempDir& dir) {
  const std::string small = small_model_dir(dir);
  const std::string out = dir / "call-counting";
  std::filesystem::create_directories(out);
  std::filesystem::copy_file(small + "/model.toml", out + "/model.toml");
  torch::jit::Module m("CallCounting");
  m.register_attribute("calls", c10::IntType::get(), 0);
  m.register_attribute("largest", c10::IntType::get(), 0);
  m.define(
      "def forward(self, x):\n"
      "    self.calls += 1\n"
      "    if x.size(0) > self.largest:\n"
      "        self.largest = x.size(0)\n"
      "    out = torch.zeros([x.size(0), 4])\n"
      "    out[:, 0] = float(self.calls)\n"
      "    out[:, 1] = float(self.largest)\n"
      "    return out\n");
  m.save(out + "/model.pt");
  return out;
}

// A model of 1/8 s waveform segments (2000 floats: a slab slot of 8 KB, so a
// worker's channel gets all 512 slots and batches of 256) whose forward()
// answers zeros: for tests of how many requests a worker holds and runs.
inline std::string short_segment_model_dir(const TempDir& dir) {
  const std::string out = dir / "short-segment";
  std::filesystem::create_directories(out);
  std::ofstream(out + "/model.toml") <<
             "[model]\nname = \"short-segment\"\ninput = \"waveform\"\nsample_rate = 16000\n"
             "segment_seconds = 0.125\nhop_seconds = 0.125\nmax_batch = 256\n\n"
             "[labels]\nnames = [\"speech\", \"music\", \"noise\", \"silence\"]\nthreshold = 0.5\n";
  torch::jit::Module m("Zeros");
  m.define("def forward(self, x):\n    return torch.zeros([x.size(0), 4])\n");
  m.save(out + "/model.pt");
  return out;
}

}  // namespace corepool::testing
