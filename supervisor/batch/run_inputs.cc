#include "supervisor/batch/run_inputs.h"

#include <string>
#include <utility>

#include "audio/audio_error.h"
#include "audio/audio_validation.h"
#include "supervisor/batch/manifest.h"

namespace corepool {

double total_audio_seconds(const std::vector<BatchInput>& inputs, int audio_stream) {
  double total = 0;
  for (const auto& in : inputs) {
    if (in.pipe) continue;  // its length is unknown, and reading it would consume it
    try {
      total += validate_audio(in.path, audio_stream).duration_seconds();
    } catch (const AudioError&) {
      // reported when the file's turn comes
    }
  }
  return total;
}

InputList shard_inputs(const BatchOptions& options) {
  InputList listed = options.manifest.empty() ? InputList{} : read_manifest(options.manifest, options.root);
  std::vector<std::string> paths;
  size_t stdin_args = 0;
  for (const auto& p : options.paths) {
    if (p == kStdinArg) ++stdin_args;
    else paths.push_back(p);
  }
  InputList all = expand_inputs(paths, std::move(listed));
  InputList mine;
  for (auto& in : all.inputs) {
    if (options.shard.owns(in.relative)) mine.inputs.push_back(std::move(in));
  }
  for (auto& e : all.errors) {
    if (e.key.empty() || options.shard.owns(e.key)) mine.errors.push_back(std::move(e));
  }
  check_listed_files(mine);
  if (stdin_args > 0) mine.inputs.push_back({kStdinName, kStdinName, "", true});
  if (stdin_args > 1) mine.errors.push_back({"", "-: standard input can be read only once; it is named twice"});
  return mine;
}

}  // namespace corepool
