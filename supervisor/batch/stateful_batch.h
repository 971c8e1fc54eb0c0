// `corepool batch` for a stateful model (ModelConfig::is_stateful()): every
// file is one or more streams (lanes, stream_lanes.h) whose chunks must run in
// order, each carrying its stream's state in the task. Called by run_batch()
// in place of the stateless driver; shares its result writers and formats.
#pragma once

#include <vector>

#include "config/model_config.h"
#include "supervisor/batch/batch.h"
#include "supervisor/batch/progress.h"

namespace corepool {

// Runs `todo` through one executor made by `make_executor`; reports `errors`
// (inputs that never opened) as failures. Fills files_ok, files_failed,
// failures, segments (chunks), audio_seconds and serving_seconds.
BatchStats run_stateful_inputs(const BatchOptions& options, const ModelConfig& model,
                               const std::vector<BatchInput>& todo, const std::vector<InputError>& errors,
                               Progress& progress, const ExecutorFactory& make_executor);

}  // namespace corepool
