// What one `corepool batch` run reads: its inputs (arguments and manifest)
// cut to its shard, with standard input last, and how much audio they hold
// for the progress bar. Called by run_batch() (batch.cc) before any engine
// exists.
#pragma once

#include <vector>

#include "supervisor/batch/batch.h"
#include "supervisor/batch/inputs.h"

namespace corepool {

// This run's inputs: arguments and manifest, cut to the shard. Errors of one
// input go with its shard; errors of a whole argument stay in every shard.
// "-" (stdin) is not a path: it is taken out and goes last, in every shard;
// named twice, it is an error of the run.
InputList shard_inputs(const BatchOptions& options);

// Seconds of audio in `inputs` (stdin counts none: its length is unknown, and
// reading it would consume it); a file that fails validation counts none
// either, and is reported when its turn comes.
double total_audio_seconds(const std::vector<BatchInput>& inputs, int audio_stream);

}  // namespace corepool
