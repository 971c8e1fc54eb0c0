// The CPU budget of this process: affinity mask plus cgroup quota (v2 cpu.max,
// v1 cfs_quota_us), and thread pinning. Called at startup to size the engine pool
// and by each engine thread / worker to pin itself. Reads files only; owns nothing.
#include "worker/host/cpus.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace corepool {
namespace {

struct CpuSetFree {
  void operator()(cpu_set_t* set) const { CPU_FREE(set); }
};
using CpuSet = std::unique_ptr<cpu_set_t, CpuSetFree>;

// Kernels may be built for more cpus than a fixed cpu_set_t holds: grow the mask
// until sched_getaffinity stops saying EINVAL (mask smaller than the kernel's).
std::vector<int> affinity_cpus() {
  for (int count = 1024; count <= (1 << 20); count *= 2) {
    const CpuSet set(CPU_ALLOC(count));
    if (!set) return {};
    const size_t size = CPU_ALLOC_SIZE(count);
    CPU_ZERO_S(size, set.get());
    if (sched_getaffinity(0, size, set.get()) == 0) {
      std::vector<int> cpus;
      for (int cpu = 0; cpu < count; ++cpu) {
        if (CPU_ISSET_S(cpu, size, set.get())) cpus.push_back(cpu);
      }
      return cpus;
    }
    if (errno != EINVAL) return {};
  }
  return {};
}

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A whole token as a positive integer, or nullopt.
std::optional<long long> positive_integer(const std::string& token) {
  long long value = 0;
  const auto result = std::from_chars(token.data(), token.data() + token.size(), value);
  if (result.ec != std::errc() || result.ptr != token.data() + token.size() || value <= 0) {
    return std::nullopt;
  }
  return value;
}

// The cgroup paths named by /proc/self/cgroup ("0::/a/b" for v2, "4:cpu,cpuacct:/a" for v1).
struct CgroupPaths {
  std::optional<std::string> unified;
  std::optional<std::string> cpu_v1;
};

bool lists_controller(const std::string& controllers, const std::string& name) {
  std::istringstream list(controllers);
  for (std::string item; std::getline(list, item, ',');) {
    if (item == name) return true;
  }
  return false;
}

CgroupPaths parse_self_cgroup(const std::string& text) {
  CgroupPaths paths;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);  // may itself contain ':'
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      paths.unified = path;
    } else if (lists_controller(controllers, "cpu")) {
      paths.cpu_v1 = path;
    }
  }
  return paths;
}

// "/a/b" -> {"/a/b", "/a", ""}: the cgroup and each parent, as suffixes of the root.
std::vector<std::string> self_and_parents(std::string path) {
  while (!path.empty() && path.back() == '/') path.pop_back();
  std::vector<std::string> dirs{path};
  while (!path.empty()) {
    const size_t slash = path.rfind('/');
    path.resize(slash == std::string::npos ? 0 : slash);
    dirs.push_back(path);
  }
  return dirs;
}

// One cgroup directory's limit in cpus: nullopt without limit files, 0 = no limit.
// An unreadable limit counts as none rather than stopping startup: the affinity
// mask still bounds the pool.
std::optional<double> read_v2_quota(const std::string& dir) {
  const std::optional<std::string> text = read_text(dir + "/cpu.max");
  if (!text) return std::nullopt;
  try {
    return parse_cpu_max(*text);
  } catch (const std::invalid_argument&) {
    return 0.0;
  }
}

std::optional<double> read_v1_quota(const std::string& dir) {
  const std::optional<std::string> quota = read_text(dir + "/cpu.cfs_quota_us");
  const std::optional<std::string> period = read_text(dir + "/cpu.cfs_period_us");
  if (!quota || !period) return std::nullopt;
  std::istringstream quota_in(*quota), period_in(*period);
  long long quota_us = -1, period_us = 0;
  quota_in >> quota_us;
  period_in >> period_us;
  if (quota_us <= 0 || period_us <= 0) return 0.0;  // -1 = no limit
  return static_cast<double>(quota_us) / static_cast<double>(period_us);
}

using QuotaReader = std::optional<double> (*)(const std::string& dir);

// A child cgroup cannot use more than any ancestor grants, so the tightest
// (smallest non-zero) limit on the way up to the root is the one that applies.
std::optional<double> tightest_quota(const std::string& base, const std::string& path,
                                     QuotaReader read) {
  std::optional<double> tightest;
  for (const std::string& dir : self_and_parents(path)) {
    const std::optional<double> quota = read(base + dir);
    if (!quota) continue;
    if (!tightest || (*quota > 0 && (*tightest == 0 || *quota < *tightest))) tightest = *quota;
  }
  return tightest;
}

}  // namespace

double cgroup_quota_cpus(const std::string& cgroup_root, const std::string& proc_self_cgroup) {
  const CgroupPaths paths = parse_self_cgroup(proc_self_cgroup);
  if (paths.unified) {
    if (const auto quota = tightest_quota(cgroup_root, *paths.unified, read_v2_quota)) {
      return *quota;
    }
  }
  // No cpu.max anywhere: a v1 or hybrid host, where the cpu controller is mounted
  // at cpu,cpuacct (or just cpu) under the root.
  const std::string v1_path = paths.cpu_v1.value_or("/");
  for (const char* mount : {"/cpu,cpuacct", "/cpu"}) {
    if (const auto quota = tightest_quota(cgroup_root + mount, v1_path, read_v1_quota)) {
      return *quota;
    }
  }
  return 0;
}

CpuBudget usable_cpus(const std::string& cgroup_root) {
  return usable_cpus(cgroup_root, read_text("/proc/self/cgroup").value_or(""));
}

CpuBudget usable_cpus(const std::string& cgroup_root, const std::string& proc_self_cgroup) {
  CpuBudget budget;
  budget.allowed = affinity_cpus();
  budget.quota_cpus = cgroup_quota_cpus(cgroup_root, proc_self_cgroup);
  int usable = static_cast<int>(budget.allowed.size());
  if (budget.quota_cpus > 0) {
    usable = std::min(usable, static_cast<int>(std::ceil(budget.quota_cpus)));
  }
  budget.usable = std::max(1, usable);
  return budget;
}

double parse_cpu_max(const std::string& text) {
  std::istringstream in(text);
  std::string quota, period, extra;
  in >> quota >> period >> extra;
  const std::optional<long long> period_us = positive_integer(period);
  // "max" may stand alone; a number needs its period; nothing may follow.
  const bool max_ok = quota == "max" && (period.empty() || period_us);
  const std::optional<long long> quota_us = positive_integer(quota);
  if (!extra.empty() || (!max_ok && !(quota_us && period_us))) {
    throw std::invalid_argument("cpu.max: cannot parse \"" + text + "\"");
  }
  if (max_ok) return 0;
  return static_cast<double>(*quota_us) / static_cast<double>(*period_us);
}

int pin_current_thread(int cpu) {
  // The upper bound only keeps CPU_ALLOC sane; the kernel rejects absent cpus.
  if (cpu < 0 || cpu >= (1 << 20)) return -EINVAL;
  const CpuSet set(CPU_ALLOC(cpu + 1));
  if (!set) return -ENOMEM;
  const size_t size = CPU_ALLOC_SIZE(cpu + 1);
  CPU_ZERO_S(size, set.get());
  CPU_SET_S(cpu, size, set.get());
  // pthread_* functions return the error number instead of setting errno.
  return -pthread_setaffinity_np(pthread_self(), size, set.get());
}

}  // namespace corepool
