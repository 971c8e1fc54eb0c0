// Silero VAD for the tests (third-party test data, never shipped): where the
// build put it, and the skip that says why when it did not.
#pragma once

#include <sys/stat.h>

#include <string>

#include <gtest/gtest.h>

namespace corepool::testing {

inline const std::string kSileroDir = COREPOOL_SILERO_MODEL;

inline bool silero_present() {
  struct stat st {};
  return ::stat((kSileroDir + "/model.pt").c_str(), &st) == 0;
}

}  // namespace corepool::testing

// In a test body or SetUp(): skips, naming the missing file and where the build takes it from.
#define SKIP_WITHOUT_SILERO()                                                                                  \
  if (!::corepool::testing::silero_present())                                                                  \
  GTEST_SKIP() << "Silero VAD skipped: " << ::corepool::testing::kSileroDir                                    \
               << "/model.pt not found (the build copies it from "                                             \
               << "../shared/models/silero-vad/silero_vad.jit when that file exists; see models/README.md)"
