// Thresholds, and why:
// - compute threads (workers x intra-op) above usable cpus, or above a cgroup
//   quota: the threads time-share or get throttled every CFS period, and a
//   forward() stalls for the length of a slice;
// - other processes above 25 % of the usable cpus: each worker is sized for
//   a whole cpu, so a quarter of them gone is a visible throughput loss;
// - memory and /dev/shm below 2x the need: a serve reload runs the old and the
//   new generation side by side until the old one drains.
#include "supervisor/doctor/doctor_capacity.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

namespace corepool {
namespace {

constexpr double kOtherLoadShare = 0.25;  // of the usable cpus

// What one more worker keeps resident beyond its channel, as a multiple of
// one forward()'s peak plus a fixed part. Measured with the default model
// (jemalloc, 5-10 min of audio, added cost per worker at 1 -> 2 -> 3 workers,
// forward() peaks 11.2 MB at max_batch 1 and 21.6 MB at 4):
// - thread mode, peak RSS: +24 / +44 MB, i.e. 2 x peak + 2 MB: every engine
//   thread's arena keeps about twice the peak (freed extents come back in other
//   sizes; dirty pages stay for dirty_decay_ms);
// - process mode, total PSS: +24 / +34 MB (channel included), i.e. 1 x peak +
//   9 MB + channel: a worker's own copy-on-write and library pages, one arena.
struct WorkerCost {
  uint64_t peaks;
  uint64_t base;
};
constexpr WorkerCost kThreadWorker{2, 2ull << 20};
constexpr WorkerCost kProcessWorker{1, 9ull << 20};

// 1.5 -> "1.5", 2 -> "2", 0.567 -> "0.57".
std::string cpus_text(double cpus) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", cpus);
  std::string out = text;
  while (out.back() == '0') out.pop_back();
  if (out.back() == '.') out.pop_back();
  return out;
}

std::string plural(long n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string workers_flag(long workers) {
  const long n = std::max(1L, workers);
  return "--workers " + std::to_string(n) + " (engine.workers = " + std::to_string(n) + ")";
}

CheckResult oversubscription_verdict(const WorkerPlan& plan, const CpuBudget& budget) {
  const long threads = static_cast<long>(plan.workers) * plan.intra;
  const std::string found = plural(plan.workers, "worker") + " x " + plural(plan.intra, "intra-op thread") + " = " +
                            plural(threads, "compute thread") + " on " + plural(budget.usable, "usable cpu");
  if (threads <= budget.usable) return CheckResult::ok("oversubscription", found);
  return CheckResult::warn("oversubscription", found + ": threads time-share cpus",
                           workers_flag(budget.usable / plan.intra) +
                               (plan.intra > 1 ? ", or intra_op_threads = 1" : ""));
}

CheckResult quota_verdict(const WorkerPlan& plan, const CpuBudget& budget) {
  if (budget.quota_cpus <= 0) return CheckResult::ok("cgroup-quota", "no cgroup cpu quota");
  const long threads = static_cast<long>(plan.workers) * plan.intra;
  const std::string found = "cgroup quota " + cpus_text(budget.quota_cpus) + " cpus for " +
                            plural(threads, "compute thread");
  if (threads <= budget.quota_cpus) return CheckResult::ok("cgroup-quota", found);
  const long fit = static_cast<long>(std::floor(budget.quota_cpus)) / plan.intra;
  return CheckResult::warn("cgroup-quota", found + ": the kernel throttles the whole group every period",
                           workers_flag(fit) + ", or raise the quota (cpu.max / systemd CPUQuota=)");
}

CheckResult affinity_verdict(const WorkerPlan& plan, const CpuBudget& budget, int online_cpus) {
  const long allowed = static_cast<long>(budget.allowed.size());
  if (allowed == 0) return CheckResult::ok("affinity", "affinity mask unreadable (sched_getaffinity failed)");
  const std::string found = "affinity mask " + std::to_string(allowed) + " of " + std::to_string(online_cpus) +
                            " online cpus";
  if (allowed >= online_cpus) return CheckResult::ok("affinity", found);
  if (!plan.workers_explicit || plan.workers <= allowed) {
    return CheckResult::ok("affinity", found + "; " + plural(plan.workers, "worker") + " fit in it");
  }
  return CheckResult::warn("affinity", found + ", but " + plural(plan.workers, "worker") + " set explicitly",
                           workers_flag(allowed) + ", or widen the mask (taskset -c, systemd CPUAffinity=)");
}

// Our cgroup and each parent up to the root: "/a/b" -> "/a/b", "/a", "".
std::optional<uint64_t> tightest_headroom(const std::string& cgroup_root, std::string dir) {
  std::optional<uint64_t> tightest;
  while (true) {
    const auto max = cgroup_bytes(read_whole_file(cgroup_root + dir + "/memory.max").value_or("max"));
    const auto current = cgroup_bytes(read_whole_file(cgroup_root + dir + "/memory.current").value_or("0"));
    if (max) {
      const uint64_t headroom = *max - std::min(*max, current.value_or(0));
      tightest = std::min(tightest.value_or(headroom), headroom);
    }
    if (dir.empty() || dir == "/") return tightest;
    dir.resize(dir.rfind('/'));
  }
}

}  // namespace

std::vector<CheckResult> cpu_budget_checks(const WorkerPlan& plan, const CpuBudget& budget, int online_cpus) {
  return {oversubscription_verdict(plan, budget), quota_verdict(plan, budget),
          affinity_verdict(plan, budget, online_cpus)};
}

CpuLoadWindow::CpuLoadWindow(const HostPaths& paths, const CpuBudget& budget)
    : paths_(paths), cpus_(budget.allowed), usable_(budget.usable), start_(std::chrono::steady_clock::now()) {
  host_start_ = cpu_jiffies(read_whole_file(paths_.proc + "/stat").value_or(""), cpus_);
  self_start_ = process_cpu_ticks(read_whole_file(paths_.proc + "/self/stat").value_or("")).value_or(0);
}

CheckResult CpuLoadWindow::finish(std::chrono::milliseconds min_window) {
  // A measurement window, not a synchronisation: jiffies only accumulate with time.
  std::this_thread::sleep_until(start_ + min_window);
  const CpuJiffies host = cpu_jiffies(read_whole_file(paths_.proc + "/stat").value_or(""), cpus_);
  const uint64_t self = process_cpu_ticks(read_whole_file(paths_.proc + "/self/stat").value_or("")).value_or(0);
  const uint64_t busy = host.busy - std::min(host.busy, host_start_.busy);
  const uint64_t own = self - std::min(self, self_start_);
  return cpu_load_verdict(busy - std::min(busy, own), host.total - std::min(host.total, host_start_.total),
                          cpus_.size(), usable_);
}

CheckResult cpu_load_verdict(uint64_t others_busy, uint64_t total, size_t cpus, int usable) {
  if (total == 0 || cpus == 0) return CheckResult::ok("cpu-load", "not measured (/proc/stat unreadable)");
  const double others_cpus = static_cast<double>(others_busy) / static_cast<double>(total) * static_cast<double>(cpus);
  const double share = others_cpus / std::max(1, usable);
  const std::string found = "other processes use " + cpus_text(others_cpus) + " of " + plural(usable, "usable cpu") +
                            " (" + std::to_string(static_cast<int>(std::lround(share * 100))) + " %)";
  if (share <= kOtherLoadShare) return CheckResult::ok("cpu-load", found);
  const long left = usable - static_cast<long>(std::ceil(others_cpus));
  return CheckResult::warn("cpu-load", found + ": workers will queue behind them",
                           "move the other load elsewhere, or run fewer workers: " + workers_flag(left));
}

MemoryNeed memory_need(const WorkerPlan& plan, uint64_t weight_bytes, uint64_t activation_peak,
                       uint64_t channel_bytes) {
  MemoryNeed need;
  need.weights = weight_bytes;
  need.workers = plan.workers;
  const bool process = plan.mode == "process";
  const WorkerCost cost = process ? kProcessWorker : kThreadWorker;
  need.worker_base = cost.base;
  need.activations = cost.peaks * activation_peak;
  need.channel = process ? channel_bytes : 0;
  return need;
}

MemoryRoom read_memory_room(const HostPaths& paths) {
  MemoryRoom room;
  room.mem_available = meminfo_bytes(read_whole_file(paths.proc + "/meminfo").value_or(""), "MemAvailable");
  const auto cgroup = unified_cgroup_path(read_whole_file(paths.proc + "/self/cgroup").value_or(""));
  if (cgroup) room.cgroup_headroom = tightest_headroom(paths.cgroup, *cgroup);
  return room;
}

CheckResult memory_verdict(const MemoryNeed& need, const MemoryRoom& room) {
  std::optional<uint64_t> available = room.mem_available;
  std::string where = "MemAvailable";
  if (room.cgroup_headroom && (!available || *room.cgroup_headroom < *available)) {
    available = room.cgroup_headroom;
    where = "cgroup memory.max - memory.current";
  }
  const uint64_t per_worker = need.worker_base + need.activations + need.channel;
  std::string found = "need " + human_bytes(need.total()) + " = weights " + human_bytes(need.weights) + " + " +
                      std::to_string(need.workers) + " x " + human_bytes(per_worker) + " per worker (" +
                      human_bytes(need.worker_base) + " base + " + human_bytes(need.activations) + " activations kept" +
                      (need.channel ? " + " + human_bytes(need.channel) + " channel" : "") + ")";
  if (!available) return CheckResult::warn("memory", found + "; available unknown", "check /proc/meminfo is readable");
  found += "; available " + human_bytes(*available) + " (" + where + ")";
  // The most workers that fit in `room`, for the fix.
  auto fitting = [&](uint64_t room_bytes) -> long {
    return room_bytes <= need.weights ? 0 : static_cast<long>((room_bytes - need.weights) / std::max<uint64_t>(per_worker, 1));
  };
  if (*available < need.total()) {
    return CheckResult::fail("memory", found, "free memory, or run fewer workers: " + workers_flag(fitting(*available)));
  }
  if (*available < 2 * need.total()) {
    return CheckResult::warn("memory", found + ": a reload needs twice the need",
                             "free memory, or run fewer workers: " + workers_flag(fitting(*available / 2)));
  }
  return CheckResult::ok("memory", found);
}

std::optional<uint64_t> shm_free_bytes(const std::string& shm_dir) {
  struct statvfs fs {};
  if (::statvfs(shm_dir.c_str(), &fs) != 0) return std::nullopt;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

CheckResult shm_verdict(const WorkerPlan& plan, uint64_t need, const std::optional<uint64_t>& free_bytes,
                        const std::string& shm_dir) {
  const std::string fix = "enlarge " + shm_dir + " to at least " + human_bytes(2 * need) +
                          " (sudo mount -o remount,size=... " + shm_dir + "; Docker: --shm-size)";
  if (!free_bytes) {
    if (plan.mode != "process") return CheckResult::ok("dev-shm", shm_dir + " not found; thread mode needs none");
    return CheckResult::fail("dev-shm", "cannot statvfs " + shm_dir + ": process mode keeps the weights there", fix);
  }
  const std::string free_text = human_bytes(*free_bytes) + " free in " + shm_dir;
  if (plan.mode != "process") return CheckResult::ok("dev-shm", free_text + "; thread mode keeps nothing there");
  const std::string found = free_text + ", process mode needs " + human_bytes(need) + " (weights + channels)";
  if (*free_bytes < need) return CheckResult::fail("dev-shm", found, fix);
  if (*free_bytes < 2 * need) return CheckResult::warn("dev-shm", found + ": a reload needs twice that", fix);
  return CheckResult::ok("dev-shm", found);
}

}  // namespace corepool
