// A small generated model (width 8: fast forward()s, the same contract as the
// default) for the engine tests that need a real model but not CNN10's cost.
// Written into the test's own temp dir by the real corepool-gen-model.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "worker/model.h"

namespace corepool::testing {

inline std::string small_model_dir(const TempDir& dir) {
  auto gen = run_process({COREPOOL_GEN_MODEL_BIN, "--out", dir / "model", "--width", "8"}, dir.path());
  if (gen.exit_code != 0) throw std::runtime_error("corepool-gen-model failed: " + gen.err);
  return dir / "model";
}

inline std::shared_ptr<const LoadedModel> small_model(const TempDir& dir) { return load_model(small_model_dir(dir)); }

}  // namespace corepool::testing
