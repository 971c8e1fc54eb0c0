// `corepool doctor`: the field's performance checklist for the effective
// config. Each line is OK, WARN or FAIL, the check's name, what was found and,
// unless OK, a one-line fix; the exit code is the worst line (0 OK, 1 WARN,
// 2 FAIL: the Nagios convention). Called by main() after the runtime threads
// are configured; runs in well under a second (one model load, one forward()).
#pragma once

#include <vector>

#include "config/config.h"
#include "supervisor/doctor/doctor_check.h"
#include "supervisor/doctor/doctor_procfs.h"
#include "worker/exit_codes.h"

namespace corepool {

// Every check for `cfg`, in checklist order.
std::vector<CheckResult> run_doctor_checks(const Config& cfg, const HostPaths& paths = {});

// Prints the checklist to stdout; returns the exit code of the worst verdict
// (kOk, kDoctorWarn, kDoctorFail).
ExitCode print_doctor_report(const Config& cfg);

}  // namespace corepool
