// `corepool batch`: every input file goes through validation -> features ->
// inference -> post-processing, and gets one result (JSON Lines: events ordered
// by time, then a summary line; or another --format), written atomically. "-" is standard input,
// read as a stream: with --out - its events are printed as each one closes. The executor (engine
// threads or worker processes, engine.mode) is made by the caller's factory.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "audio/audio_source.h"
#include "config/model_config.h"
#include "supervisor/batch/event_filter.h"
#include "supervisor/batch/inputs.h"
#include "supervisor/batch/output_format.h"
#include "supervisor/batch/shard.h"
#include "supervisor/pool/executor_factory.h"
#include "worker/exit_codes.h"

namespace corepool {

struct BatchOptions {
  std::vector<std::string> paths;  // files, directories, glob patterns
  std::string manifest;            // a file listing inputs, one per line (see manifest.h)
  std::string root;                // the manifest's result root; empty: its common directory
  ShardSpec shard;                 // this run's 1/N of the inputs (sharded: writes a shard report)
  std::string out_dir = "corepool-out";  // "-" writes every line to stdout
  bool force = false;              // redo inputs whose result is complete
  bool progress = false;           // draw the progress bar on stderr
  OutputFormat format = OutputFormat::kJsonl;  // timeline: with out_dir "-" only (timeline.h)
  EventFilterOptions filter;       // --min-score, --merge-gap
  int audio_stream = 0;            // which audio stream of each input (0 = the first)
  RawPcm raw;                      // stdin is headerless PCM of this shape (--raw); empty: probe it
};

struct BatchStats {
  size_t files_ok = 0;
  size_t files_failed = 0;   // including arguments that named no file
  size_t files_skipped = 0;  // result already complete
  size_t shard_inputs = 0;   // inputs of this shard (all inputs when not sharded)
  std::vector<InputError> failures;  // one per failed file or argument
  uint64_t segments = 0;
  double audio_seconds = 0;
  double wall_seconds = 0;
  double serving_seconds = 0;  // from "executor ready" to the end: what benchmarks compare
  ExitCode exit_code() const { return files_failed > 0 ? ExitCode::kInputsFailed : ExitCode::kOk; }
};

// Errors (one line each, naming the file) go to stderr; the run goes on.
// Throws ManifestError if the manifest cannot be used.
BatchStats run_batch(const BatchOptions& options, const ModelConfig& model,
                     const ExecutorFactory& make_executor);

}  // namespace corepool
