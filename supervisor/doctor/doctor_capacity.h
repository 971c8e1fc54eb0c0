// The doctor's capacity checks: do N workers fit this host's cpus (threads,
// cgroup quota, affinity mask, other processes' load), its memory and its
// /dev/shm? Called by doctor.cc with the effective Config's numbers and what
// the model probe measured. No LibTorch: each verdict is a pure function of
// numbers, and the readers take their roots from HostPaths.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "supervisor/doctor/doctor_check.h"
#include "supervisor/doctor/doctor_procfs.h"
#include "worker/host/cpus.h"

namespace corepool {

// What the pool will run, from the effective Config.
struct WorkerPlan {
  std::string mode = "thread";    // "thread" | "process"
  int workers = 1;                // resolved: engine.workers, or usable cpus when 0
  bool workers_explicit = false;  // engine.workers / --workers was set (not 0)
  int intra = 1;                  // intra-op threads per worker
};

// "oversubscription", "cgroup-quota", "affinity", in that order.
std::vector<CheckResult> cpu_budget_checks(const WorkerPlan& plan, const CpuBudget& budget, int online_cpus);

// Other processes' cpu use on our cpus over a window: busy jiffies of the
// allowed cpus (/proc/stat) minus this process's own (/proc/self/stat).
// The window opens on construction, so the doctor's own work (model load, a
// forward) can run inside it; its cpu time is subtracted.
class CpuLoadWindow {
 public:
  CpuLoadWindow(const HostPaths& paths, const CpuBudget& budget);
  // Waits until `min_window` has passed since construction, then judges.
  CheckResult finish(std::chrono::milliseconds min_window);

 private:
  HostPaths paths_;
  std::vector<int> cpus_;
  int usable_ = 1;
  std::chrono::steady_clock::time_point start_;
  CpuJiffies host_start_;
  uint64_t self_start_ = 0;
};

// `others_busy` jiffies of other processes out of `total` jiffies on `cpus` cpus.
CheckResult cpu_load_verdict(uint64_t others_busy, uint64_t total, size_t cpus, int usable);

// What N workers need resident: the weights once (thread mode shares the
// module; process mode one shared segment) plus, per worker, a fixed cost,
// the activation memory its allocator keeps after forward()s at max_batch
// and (process mode) its channel segment of rings and slab.
struct MemoryNeed {
  uint64_t weights = 0;
  int workers = 1;
  uint64_t worker_base = 0;
  uint64_t activations = 0;  // kept per worker: a multiple of one forward()'s peak
  uint64_t channel = 0;
  uint64_t total() const { return weights + static_cast<uint64_t>(workers) * (worker_base + activations + channel); }
};
// `activation_peak`: the peak heap growth of one forward() at max_batch.
MemoryNeed memory_need(const WorkerPlan& plan, uint64_t weight_bytes, uint64_t activation_peak,
                       uint64_t channel_bytes);

// Room for it: MemAvailable, and the tightest cgroup v2 memory.max minus
// memory.current on the way from our cgroup up to the root (nullopt = no limit).
struct MemoryRoom {
  std::optional<uint64_t> mem_available;
  std::optional<uint64_t> cgroup_headroom;
};
MemoryRoom read_memory_room(const HostPaths& paths);

// FAIL below the need, WARN below twice the need (a reload runs the old and
// the new generation side by side).
CheckResult memory_verdict(const MemoryNeed& need, const MemoryRoom& room);

// Process mode puts the weights and each worker's channel in /dev/shm; a
// reload needs a second set. Thread mode uses none. `free_bytes` nullopt =
// statvfs failed.
CheckResult shm_verdict(const WorkerPlan& plan, uint64_t need, const std::optional<uint64_t>& free_bytes,
                        const std::string& shm_dir);
std::optional<uint64_t> shm_free_bytes(const std::string& shm_dir);

}  // namespace corepool
