// Parsers for the /proc, /sys and cgroup text the doctor reads: pure functions
// from a file's text to values, so that tests feed them any text they like.
// No LibTorch, no I/O except read_whole_file(); called by supervisor/doctor_*.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace corepool {

// Where the doctor reads the host. Tests point these at directories laid out
// like the real ones.
struct HostPaths {
  std::string proc = "/proc";
  std::string sys = "/sys";
  std::string cgroup = "/sys/fs/cgroup";
  std::string shm = "/dev/shm";
};

// The whole file, or nullopt when it cannot be opened.
std::optional<std::string> read_whole_file(const std::string& path);

// A sysfs choice file ("always [madvise] never") -> the selected word
// ("madvise"); "" when no word is bracketed.
std::string selected_choice(const std::string& text);

// A /proc/meminfo field ("MemAvailable:  123 kB") in bytes; nullopt if absent.
std::optional<uint64_t> meminfo_bytes(const std::string& meminfo, const std::string& key);

// Busy and total jiffies summed over the "cpuN" lines of /proc/stat for `cpus`.
// Busy is everything but idle and iowait; steal counts as busy, since it is
// another guest's load on our cpus. guest/guest_nice are already inside
// user/nice and are not added twice.
struct CpuJiffies {
  uint64_t busy = 0;
  uint64_t total = 0;
};
CpuJiffies cpu_jiffies(const std::string& proc_stat, const std::vector<int>& cpus);

// utime + stime (clock ticks, all threads) from a /proc/PID/stat line.
// The command name may hold spaces and parentheses, so fields are counted
// from the last ')'. nullopt when the line is malformed.
std::optional<uint64_t> process_cpu_ticks(const std::string& proc_pid_stat);

// The "flags" of the first processor in /proc/cpuinfo.
std::vector<std::string> cpu_flags(const std::string& cpuinfo);

// The cgroup v2 path of a process ("0::/a/b" line of /proc/PID/cgroup), or
// nullopt on a cgroup v1 only host.
std::optional<std::string> unified_cgroup_path(const std::string& proc_pid_cgroup);

// A memory.max / memory.current value in bytes; nullopt for "max" or garbage.
std::optional<uint64_t> cgroup_bytes(const std::string& text);

// A thread count from OMP_NUM_THREADS and friends: "8" -> 8, "4,2" (OpenMP's
// nested list) -> 4 (the outer level, what each worker starts); nullopt when
// the text does not start with a positive number.
std::optional<long> thread_count(const std::string& value);

}  // namespace corepool
