// What every command logs at startup, so that a slow run's log already says
// why: the doctor's process checks (LibTorch, BLAS, oneDNN, CPU ISA, thread
// variables, allocator, transparent huge pages) and the usable cpus. Called
// once by main() after the runtime threads are configured; `corepool doctor`
// prints the full checklist instead (supervisor/doctor/doctor.h).
#pragma once

namespace corepool {

// OK lines at info level, WARN/FAIL lines at warn level with their fix.
void log_host_facts();

}  // namespace corepool
