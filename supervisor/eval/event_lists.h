// The event lists `corepool eval` compares: references in the DCASE / sed_eval
// text format, and batch's own results (JSON Lines, or --format dcase's .tsv).
// Each file's events are keyed by its audio file's name without directory and
// extension ("sub/demo.wav" -> "demo"), so that references and results written
// by different tools pair up. Called by eval.cc; nothing outlives the call.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace corepool {

struct AnnotatedEvent {
  double onset = 0;   // seconds
  double offset = 0;  // seconds, >= onset
  std::string label;
};

// One audio file's events, in the order its list gives them.
struct FileEvents {
  std::string source;  // the list file it came from, for messages
  std::vector<AnnotatedEvent> events;
};

using EventLists = std::map<std::string, FileEvents>;  // by file_key()

// Unreadable or malformed input: "<file>:<line>: <what>".
struct EvalInputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "dir/sub/demo.wav" -> "demo"; "a.b.wav" -> "a.b"; "noext" -> "noext".
std::string file_key(const std::string& name);

// Every *.txt, *.tsv and *.ann below `dir`. A line is `filename<TAB>onset<TAB>
// offset<TAB>label`, or `onset<TAB>offset<TAB>label` (the file is then the
// list's own name minus its extension, "demo.wav.txt" -> "demo"), or a lone
// `filename` (a file with no events); columns split on tabs, or on spaces when
// a line has no tab. A first line that is not numbers where times go is a
// header and skipped; blank lines are skipped. Throws EvalInputError.
EventLists read_reference_dir(const std::string& dir);

// Every *.jsonl (a complete batch result: its event lines and its summary line;
// no summary line is an error) and *.tsv (--format dcase) below `dir`, hidden
// directories (the shard reports) and temporary files left out. Throws
// EvalInputError, also when two results have one key.
EventLists read_results_dir(const std::string& dir);

}  // namespace corepool
