// Kernel text formats, parsed leniently: a field we cannot read makes its
// check say "unknown", it never stops the doctor.
#include "supervisor/doctor/doctor_procfs.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>

namespace corepool {
namespace {

std::optional<uint64_t> leading_number(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return std::nullopt;
  uint64_t value = 0;
  const auto result = std::from_chars(text.data() + begin, text.data() + text.size(), value);
  if (result.ec != std::errc()) return std::nullopt;
  return value;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

std::optional<std::string> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string selected_choice(const std::string& text) {
  const size_t open = text.find('[');
  const size_t close = open == std::string::npos ? open : text.find(']', open);
  if (close == std::string::npos) return "";
  return text.substr(open + 1, close - open - 1);
}

std::optional<uint64_t> meminfo_bytes(const std::string& meminfo, const std::string& key) {
  std::istringstream lines(meminfo);
  for (std::string line; std::getline(lines, line);) {
    if (!starts_with(line, key + ":")) continue;
    const auto kb = leading_number(line.substr(key.size() + 1));
    if (!kb) return std::nullopt;
    return *kb * 1024;
  }
  return std::nullopt;
}

CpuJiffies cpu_jiffies(const std::string& proc_stat, const std::vector<int>& cpus) {
  CpuJiffies sum;
  std::istringstream lines(proc_stat);
  for (std::string line; std::getline(lines, line);) {
    if (!starts_with(line, "cpu") || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    fields >> cpu;
    if (std::find(cpus.begin(), cpus.end(), cpu) == cpus.end()) continue;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    uint64_t value[8] = {};
    for (auto& v : value) fields >> v;
    const uint64_t idle = value[3] + value[4];
    const uint64_t busy = value[0] + value[1] + value[2] + value[5] + value[6] + value[7];
    sum.busy += busy;
    sum.total += busy + idle;
  }
  return sum;
}

std::optional<uint64_t> process_cpu_ticks(const std::string& proc_pid_stat) {
  const size_t close = proc_pid_stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  // After ')': state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt
  // majflt cmajflt utime(14) stime(15).
  std::istringstream fields(proc_pid_stat.substr(close + 1));
  std::string skip;
  for (int field = 3; field <= 13; ++field) fields >> skip;
  uint64_t utime = 0, stime = 0;
  if (!(fields >> utime >> stime)) return std::nullopt;
  return utime + stime;
}

std::vector<std::string> cpu_flags(const std::string& cpuinfo) {
  std::istringstream lines(cpuinfo);
  for (std::string line; std::getline(lines, line);) {
    if (!starts_with(line, "flags")) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream words(line.substr(colon + 1));
    std::vector<std::string> flags;
    for (std::string word; words >> word;) flags.push_back(word);
    return flags;
  }
  return {};
}

std::optional<std::string> unified_cgroup_path(const std::string& proc_pid_cgroup) {
  std::istringstream lines(proc_pid_cgroup);
  for (std::string line; std::getline(lines, line);) {
    if (starts_with(line, "0::")) return line.substr(3);
  }
  return std::nullopt;
}

std::optional<uint64_t> cgroup_bytes(const std::string& text) { return leading_number(text); }

std::optional<long> thread_count(const std::string& value) {
  const auto n = leading_number(value);
  if (!n || *n == 0 || *n > 1'000'000) return std::nullopt;
  return static_cast<long>(*n);
}

}  // namespace corepool
