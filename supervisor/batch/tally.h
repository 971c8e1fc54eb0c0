// How a batch run counts each input's end, the same way in both drivers
// (batch.cc, stateful_batch.cc): a file done adds its segments and audio; a
// failed one prints its line (naming the file) and joins the failures. Either
// moves the progress bar on. Callers hold the lock that guards their stats.
#pragma once

#include <cstdint>
#include <string>

#include "supervisor/batch/batch.h"
#include "supervisor/batch/progress.h"

namespace corepool {

void tally_done(BatchStats& stats, Progress& progress, uint64_t segments, double audio_seconds);
// `key`: the input as the run names it (its path relative to the argument).
void tally_failed(BatchStats& stats, Progress& progress, const std::string& key, const std::string& message);

}  // namespace corepool
