// The checklist in order: the process (LibTorch, BLAS, oneDNN, ISA, thread
// variables, allocator, THP), the cpu budget, the model and one forward(),
// other processes' load, memory, /dev/shm. The cpu-load window opens first so
// that the model load and forward() run inside it instead of after it.
#include "supervisor/doctor/doctor.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>


#include "shm/channel.h"
#include "supervisor/doctor/doctor_capacity.h"
#include "supervisor/doctor/doctor_host.h"
#include "supervisor/doctor/doctor_model.h"
#include "worker/host/cpus.h"
#include "worker/runtime.h"

namespace corepool {
namespace {

// Long enough for 100 Hz jiffies to mean something (30 per cpu), short enough
// to keep the doctor under a second.
constexpr std::chrono::milliseconds kLoadWindow{300};

WorkerPlan plan_of(const Config& cfg, const CpuBudget& budget) {
  WorkerPlan plan;
  plan.mode = cfg.mode;
  plan.workers_explicit = cfg.workers > 0;
  plan.workers = plan.workers_explicit ? cfg.workers : budget.usable;
  // 0 = LibTorch's default pool, one thread per core, per engine thread.
  plan.intra = cfg.intra_op_threads > 0 ? cfg.intra_op_threads : std::max(1, intra_op_threads_now());
  return plan;
}

// A process-mode worker's rings and slab at their largest (ProcessPool sizes
// the slab to two batches: a smaller batch may need less).
uint64_t channel_bytes(const ModelConfig& model) {
  return shm::ChannelLayout::for_model(static_cast<uint32_t>(model.slot_task_floats()),
                                       static_cast<uint32_t>(model.item_floats()),
                                       static_cast<uint32_t>(model.slot_result_floats()))
      .total_bytes;
}

std::vector<CheckResult> room_checks(const WorkerPlan& plan, const ModelProbe& probe, const HostPaths& paths) {
  if (!probe.model) {
    const std::string why = "not checked: the model did not load";
    const std::string fix = "fix the model line first";
    return {CheckResult::warn("memory", why, fix), CheckResult::warn("dev-shm", why, fix)};
  }
  const uint64_t channel = channel_bytes(probe.model->config);
  const uint64_t shm_need = probe.model->weight_bytes + static_cast<uint64_t>(plan.workers) * channel;
  CheckResult shm = shm_verdict(plan, shm_need, shm_free_bytes(paths.shm), paths.shm);
  // Without a forward() the activations, most of a worker's cost, are unknown.
  if (!probe.forward_ok) {
    return {CheckResult::warn("memory", "not checked: forward() failed", "fix the forward line first"), shm};
  }
  const MemoryNeed need = memory_need(plan, probe.model->weight_bytes, probe.activation_bytes, channel);
  return {memory_verdict(need, read_memory_room(paths)), shm};
}

ExitCode exit_code_of(Verdict worst) {
  switch (worst) {
    case Verdict::kOk: return ExitCode::kOk;
    case Verdict::kWarn: return ExitCode::kDoctorWarn;
    case Verdict::kFail: return ExitCode::kDoctorFail;
  }
  return ExitCode::kInternal;  // not reached: every verdict is handled above
}

template <typename T>
void append(std::vector<T>& to, std::vector<T> from) {
  to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
}

}  // namespace

std::vector<CheckResult> run_doctor_checks(const Config& cfg, const HostPaths& paths) {
  const CpuBudget budget = usable_cpus(paths.cgroup);
  const WorkerPlan plan = plan_of(cfg, budget);
  CpuLoadWindow load(paths, budget);
  std::vector<CheckResult> results = process_checks(plan.intra, cfg.allocator, paths);
  append(results, cpu_budget_checks(plan, budget, static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN))));
  const ModelProbe probe = probe_model(cfg.model_dir, cfg.max_batch, cfg.optimize, cfg.kernels);
  append(results, probe.results);
  results.push_back(load.finish(kLoadWindow));
  append(results, room_checks(plan, probe, paths));
  return results;
}

ExitCode print_doctor_report(const Config& cfg) {
  const std::string workers = cfg.workers > 0 ? std::to_string(cfg.workers) : "auto";
  const std::string intra = cfg.intra_op_threads > 0 ? std::to_string(cfg.intra_op_threads) : "default";
  const std::string batch = cfg.max_batch > 0 ? std::to_string(cfg.max_batch) : "measured";
  std::printf("corepool doctor: %s mode, %s workers, %s intra-op thread(s), max batch %s, optimize %s, kernels %s, "
              "model %s\n",
              cfg.mode.c_str(), workers.c_str(), intra.c_str(), batch.c_str(), cfg.optimize.c_str(),
              cfg.kernels.c_str(), cfg.model_dir.c_str());
  const std::vector<CheckResult> results = run_doctor_checks(cfg);
  int counts[3] = {0, 0, 0};
  for (const auto& r : results) {
    std::printf("%s\n", format_check(r).c_str());
    ++counts[static_cast<int>(r.verdict)];
  }
  const ExitCode exit_code = exit_code_of(worst_verdict(results));
  std::printf("\n%d OK, %d WARN, %d FAIL: exit %d\n", counts[0], counts[1], counts[2], exit_status(exit_code));
  std::fflush(stdout);
  return exit_code;
}

}  // namespace corepool
