// What the field's guides say to check first when inference is slow: LibTorch
// version, BLAS vendor, oneDNN, CPU ISA, intra/inter-op threads, the thread
// environment variables, the allocator, the usable cpus. Logged at startup by
// every command and printed as a table by `corepool doctor`.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace corepool {

struct HostFact {
  std::string name;
  std::string value;
  std::string warning;  // non-empty: a known cause of slow or oversubscribed inference
};

std::vector<HostFact> collect_host_facts();

// Logs every fact at info level (warnings at warn level).
void log_host_facts();

// Prints the table for `corepool doctor`; returns the number of warnings.
int print_doctor_report();

}  // namespace corepool
