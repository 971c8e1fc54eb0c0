// One line of `corepool doctor`: a verdict, the check's name, what was found
// and, for WARN/FAIL, a one-line fix. Every check (supervisor/doctor_*.cc)
// returns these; doctor.cc prints them, startup_report.cc logs them.
// Plain values, no LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace corepool {

// Ordered by severity: `corepool doctor` exits with the worst one (doctor.cc
// maps it to ExitCode; the Nagios convention: 0 OK, 1 WARNING, 2 CRITICAL).
enum class Verdict { kOk = 0, kWarn = 1, kFail = 2 };

struct CheckResult {
  Verdict verdict = Verdict::kOk;
  std::string name;   // one word, no spaces: "blas", "OMP_NUM_THREADS"
  std::string found;  // what the host, process or model really has
  std::string fix;    // one line; empty when OK

  static CheckResult ok(std::string name, std::string found) {
    return {Verdict::kOk, std::move(name), std::move(found), ""};
  }
  static CheckResult warn(std::string name, std::string found, std::string fix) {
    return {Verdict::kWarn, std::move(name), std::move(found), std::move(fix)};
  }
  static CheckResult fail(std::string name, std::string found, std::string fix) {
    return {Verdict::kFail, std::move(name), std::move(found), std::move(fix)};
  }
};

const char* verdict_name(Verdict verdict);  // "OK" | "WARN" | "FAIL"

// The most severe verdict of `results` (kOk when empty).
Verdict worst_verdict(const std::vector<CheckResult>& results);

// The printed line: "WARN  blas  <found>  fix: <fix>".
std::string format_check(const CheckResult& result);

// 19456000 -> "18.6 MB", 21474836480 -> "20.0 GB" (powers of 2^10, as free(1)
// and the bench tables count).
std::string human_bytes(uint64_t bytes);

}  // namespace corepool
