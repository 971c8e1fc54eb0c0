// The startup's log: the logger every command writes to (stderr), and what
// every command logs at startup, so that a slow run's log already says why:
// the doctor's process checks (LibTorch, BLAS, oneDNN, CPU ISA, thread
// variables, allocator, transparent huge pages) and the usable cpus. Called
// once each by main(); `corepool doctor` prints the full checklist instead
// (supervisor/doctor/doctor.h).
#pragma once

#include <string>

namespace corepool {

// The process's default logger: colour on a terminal, "[L] message", at
// `level` (trace|debug|info|warn|error|off). After the allocator re-exec.
void setup_logging(const std::string& level);

// After the runtime threads are configured. OK lines at info level, WARN/FAIL lines at warn level with their fix.
void log_host_facts();

}  // namespace corepool
