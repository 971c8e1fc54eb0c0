// See tally.h.
#include "supervisor/batch/tally.h"

namespace corepool {

void tally_done(BatchStats& stats, Progress& progress, uint64_t segments, double audio_seconds) {
  ++stats.files_ok;
  stats.segments += segments;
  stats.audio_seconds += audio_seconds;
  progress.file_done();
}

void tally_failed(BatchStats& stats, Progress& progress, const std::string& key, const std::string& message) {
  progress.print_line("error: " + message);
  ++stats.files_failed;
  stats.failures.push_back({key, message});
  progress.file_done();
}

}  // namespace corepool
