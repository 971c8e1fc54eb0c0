// `corepool eval`: read both directories, pair each reference file with its
// result, add each pair's counts, print. Problems are named before any number
// is printed, so a report never mixes with an error.
#include "supervisor/eval/eval.h"

#include <set>

#include "supervisor/eval/eval_report.h"
#include "supervisor/eval/event_lists.h"
#include "supervisor/eval/sed_metrics.h"

namespace corepool {
namespace {

// Every label of either side of the pairs, sorted: a label the system invents still gets
// its row (all insertions), one it never finds its row of deletions.
std::vector<std::string> all_labels(const EventLists& reference, const EventLists& results) {
  std::set<std::string> labels;
  for (const auto& [key, f] : reference) {
    for (const AnnotatedEvent& e : f.events) labels.insert(e.label);
    for (const AnnotatedEvent& e : results.at(key).events) labels.insert(e.label);
  }
  return {labels.begin(), labels.end()};
}

}  // namespace

ExitCode run_eval(const EvalOptions& options, std::FILE* out, std::FILE* err) {
  EventLists reference, results;
  try {
    reference = read_reference_dir(options.reference_dir);
    results = read_results_dir(options.results_dir);
  } catch (const EvalInputError& e) {
    std::fprintf(err, "corepool eval: %s\n", e.what());
    return ExitCode::kUsage;
  }
  if (reference.empty()) {
    std::fprintf(err, "corepool eval: %s: no reference event list (.txt, .tsv or .ann)\n",
                 options.reference_dir.c_str());
    return ExitCode::kUsage;
  }
  size_t unmatched = 0;
  for (const auto& [key, f] : reference) {
    if (results.count(key)) continue;
    std::fprintf(err, "error: %s: no result for '%s' in %s\n", f.source.c_str(), key.c_str(),
                 options.results_dir.c_str());
    ++unmatched;
  }
  if (unmatched > 0) return ExitCode::kEvalUnmatched;
  for (const auto& [key, f] : results) {
    if (reference.count(key)) continue;
    std::fprintf(err, "warning: %s: no reference for '%s', left out\n", f.source.c_str(), key.c_str());
  }
  EvalReport report;
  const std::vector<std::string> labels = all_labels(reference, results);
  for (const auto& [key, ref] : reference) {
    const std::vector<AnnotatedEvent>& est = results.at(key).events;
    add_segment_based(ref.events, est, labels, options.segment_seconds, report.segment_based);
    add_event_based(ref.events, est, labels, options.t_collar, options.percentage_of_length, report.event_based);
    ++report.files;
  }
  const std::string text = options.json ? eval_json(report, options).dump() + "\n" : eval_tables(report, options);
  std::fputs(text.c_str(), out);
  return ExitCode::kOk;
}

}  // namespace corepool
