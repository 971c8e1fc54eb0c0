// The merge: expands the batch's inputs exactly as batch does (same keys, no
// shard filter), looks up each result's summary line, and explains every
// missing result with the latest shard report that failed it.
#include "supervisor/batch/merge.h"

#include <cmath>
#include <map>

#include "supervisor/batch/manifest.h"
#include "supervisor/batch/result_file.h"
#include "supervisor/batch/shard_report.h"

namespace corepool {
namespace {

using nlohmann::json;

// Failures by result key from every report; a later report (sorted by name)
// overwrites an earlier one's message for the same input.
std::map<std::string, std::string> reported_failures(const std::vector<ShardReport>& reports) {
  std::map<std::string, std::string> failures;
  for (const ShardReport& r : reports) {
    for (const InputError& f : r.failures) {
      if (!f.key.empty()) failures[f.key] = f.message;
    }
  }
  return failures;
}

void count_result(MergeSummary& s, const json& summary) {
  ++s.complete;
  s.audio_seconds += summary.value("duration", 0.0);
  s.segments += summary.value("segments", uint64_t{0});
  s.events += summary.value("events", uint64_t{0});
}

}  // namespace

json MergeSummary::to_json() const {
  json failures = json::array();
  for (const InputError& f : failed) failures.push_back({{"input", f.key}, {"error", f.message}});
  return {{"inputs", inputs},
          {"complete", complete},
          {"audio_hours", std::round(audio_seconds / 3600.0 * 1e4) / 1e4},
          {"audio_seconds", std::round(audio_seconds * 1e3) / 1e3},
          {"segments", segments},
          {"events", events},
          {"shard_reports", shard_reports},
          {"failed", failures},
          {"unfinished", unfinished}};
}

MergeSummary merge_results(const MergeOptions& options) {
  InputList listed = options.manifest.empty() ? InputList{} : read_manifest(options.manifest, options.root);
  const InputList list = expand_inputs(options.paths, std::move(listed));
  std::vector<std::string> problems;
  const std::vector<ShardReport> reports = read_shard_reports(options.out_dir, problems);
  const std::map<std::string, std::string> failures = reported_failures(reports);
  MergeSummary s;
  s.shard_reports = reports.size();
  s.inputs = list.inputs.size();
  for (const BatchInput& in : list.inputs) {
    const auto summary = result_summary(options.out_dir + "/" + in.relative + ".jsonl");
    if (summary) {
      count_result(s, *summary);
    } else if (auto f = failures.find(in.relative); f != failures.end()) {
      s.failed.push_back({in.relative, f->second});
    } else {
      s.unfinished.push_back(in.relative);
    }
  }
  // Inputs that never became a result (clashes, bad arguments): each failed.
  s.inputs += list.errors.size();
  s.failed.insert(s.failed.end(), list.errors.begin(), list.errors.end());
  s.problems = std::move(problems);
  return s;
}

ExitCode print_merge(const MergeSummary& s, const std::string& out_dir, std::FILE* out, std::FILE* err) {
  std::fprintf(out, "%s\n", s.to_json().dump().c_str());
  for (const std::string& p : s.problems) std::fprintf(err, "warning: %s\n", p.c_str());
  for (const InputError& f : s.failed) std::fprintf(err, "failed: %s\n", f.message.c_str());
  for (const std::string& key : s.unfinished) {
    std::fprintf(err, "unfinished: %s: no shard finished it (no complete %s/%s.jsonl)\n", key.c_str(),
                 out_dir.c_str(), key.c_str());
  }
  std::fprintf(err, "merge: %zu of %zu inputs complete, %.3f h of audio; %zu failed, %zu unfinished\n",
               s.complete, s.inputs, s.audio_seconds / 3600.0, s.failed.size(), s.unfinished.size());
  return static_cast<ExitCode>(s.exit_code());
}

}  // namespace corepool
