// Which CPUs this process may use: the affinity mask intersected with the cgroup
// CPU quota (cgroup v2 cpu.max, or v1 cfs_quota_us/cfs_period_us), never
// hardware_concurrency(). Used to size the engine pool and to pin its threads.
#pragma once

#include <string>
#include <vector>

namespace corepool {

struct CpuBudget {
  std::vector<int> allowed;  // cpu ids in the affinity mask, ascending
  double quota_cpus = 0;     // cgroup quota in cpus (e.g. 1.5); 0 = no quota
  int usable = 1;            // min(allowed.size(), ceil(quota)) and at least 1
};

// Reads sched_getaffinity and the cgroup files under `cgroup_root`
// (default "/sys/fs/cgroup", for tests a temp dir laid out like it) for the
// cgroup of this process (/proc/self/cgroup).
CpuBudget usable_cpus(const std::string& cgroup_root = "/sys/fs/cgroup");
// The same for the cgroup named by `proc_self_cgroup` (the text of a
// /proc/PID/cgroup file), so that tests need not depend on the host's cgroups.
CpuBudget usable_cpus(const std::string& cgroup_root, const std::string& proc_self_cgroup);

// The cgroup CPU quota in cpus (0 = none) for the process whose /proc/self/cgroup
// text is `proc_self_cgroup`: the smallest cpu.max along its cgroup v2 path and
// every parent up to `cgroup_root`, else the same walk over cgroup v1's
// cpu.cfs_quota_us / cpu.cfs_period_us. usable_cpus() calls it; it is public so
// tests can describe any cgroup path over a fake root.
double cgroup_quota_cpus(const std::string& cgroup_root, const std::string& proc_self_cgroup);

// Parses the text of a cgroup v2 cpu.max file ("max 100000" or "150000 100000").
// Returns the quota in cpus, 0 for "max"; throws std::invalid_argument on garbage.
double parse_cpu_max(const std::string& text);

// Pins the calling thread to `cpu`. Returns 0 or -errno.
int pin_current_thread(int cpu);

}  // namespace corepool
