// `corepool eval --reference REF_DIR RESULTS_DIR`: how well batch's results
// agree with reference annotations, in the DCASE challenge's terms: segment-
// based and event-based F1, precision, recall and error rate, per label and
// overall (micro), as sed_eval defines them (sed_metrics.h). Reads the two
// directories only; never loads the model. Called by supervisor/commands.cc.
#pragma once

#include <cstdio>
#include <string>

#include "worker/exit_codes.h"

namespace corepool {

struct EvalOptions {
  std::string reference_dir;  // DCASE event lists (event_lists.h)
  std::string results_dir;    // batch's --out: .jsonl or .tsv (--format dcase) results
  bool json = false;          // one JSON object instead of the tables
  double segment_seconds = 1.0;        // sed_eval's default time_resolution
  double t_collar = 0.2;               // DCASE: 200 ms onset (and offset) collar
  double percentage_of_length = 0.2;   // DCASE: offset within max(collar, 20 % of the reference's length)
};

// Prints the report on `out` and problems on `err`, one line each. kOk; kUsage
// when a directory or a file in it cannot be read or parsed (the line names
// the file and line); kEvalUnmatched when a reference file has no result (each
// named; no metrics are printed, they would count its events as missed). A
// result without a reference is a warning and is left out.
ExitCode run_eval(const EvalOptions& options, std::FILE* out, std::FILE* err);

}  // namespace corepool
