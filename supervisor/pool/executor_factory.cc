#include "supervisor/pool/executor_factory.h"

#include <spdlog/spdlog.h>

#include "supervisor/pool/process_pool.h"
#include "worker/host/cpus.h"
#include "worker/plan_cache.h"
#include "worker/thread_executor.h"

namespace corepool {

std::string plan_cache_dir(const Config& config) {
  if (config.plan_cache == "off") return "";
  return config.plan_cache.empty() ? default_plan_cache_dir() : config.plan_cache;
}

int effective_workers(const Config& config) {
  return config.workers > 0 ? config.workers : usable_cpus().usable;
}

ExecutorFactory make_executor_factory(const Config& config, std::shared_ptr<const LoadedModel> model,
                                      EnginePlan* plan_out, ExecutorStart start) {
  const bool process = config.mode == "process";
  // Process mode: a batch fits the worker's slab (channel_layout()); thread mode's limit is the model's.
  const int limit = process ? static_cast<int>(channel_layout(model->config).batch_limit()) : 1024;
  const EnginePlan plan = plan_engine(
      model, {config.optimize, config.max_batch, limit, process, {},
              config.kernels, plan_cache_dir(config), config.replan, effective_workers(config)});
  if (plan_out) *plan_out = plan;
  Config cfg = config;
  cfg.max_batch = plan.max_batch;
  const CpuBudget budget = usable_cpus();
  const int workers = effective_workers(cfg);
  // A thread pinned to one cpu hands that mask to the intra-op threads it
  // starts: with more than one, they would all share its cpu.
  const bool pin = cfg.pin_threads && cfg.intra_op_threads == 1;
  if (cfg.pin_threads && !pin) spdlog::info("engines not pinned: intra-op threads {} (pinning needs 1)", cfg.intra_op_threads);
  const std::vector<int> cpus = pin ? budget.allowed : std::vector<int>{};
  spdlog::info("model {} ({} labels, {:.1f} MB of weights), {} mode, {} {}", cfg.model_dir,
               model->config.labels.size(), model->weight_bytes / 1e6, cfg.mode, workers,
               cfg.mode == "thread" ? "engine thread(s)" : "worker process(es)");
  if (cfg.mode == "process") {
    ProcessPoolOptions opts;
    opts.workers = workers;
    opts.max_batch = cfg.max_batch;
    opts.max_batch_delay_us = cfg.max_batch_delay_us;
    opts.intra_op_threads = cfg.intra_op_threads;
    opts.queue_depth = cfg.queue_depth;
    opts.cpus = cpus;
    opts.hang_timeout_ms = cfg.hang_timeout_ms;
    opts.max_requests = static_cast<uint64_t>(cfg.max_requests);
    opts.max_rss_bytes = static_cast<uint64_t>(cfg.max_rss_mb) << 20;
    opts.log_level = cfg.log_level;
    opts.optimize = cfg.optimize;
    opts.kernels = cfg.kernels;
    opts.start_on_first_ready = start == ExecutorStart::kFirstReady;
    return [model, opts](Executor::Completion done) {
      return std::make_unique<ProcessPool>(model, opts, std::move(done));
    };
  }
  ThreadExecutorOptions opts{workers, cfg.max_batch, cfg.queue_depth, cpus};
  return [model, opts](Executor::Completion done) {
    return std::make_unique<ThreadExecutor>(model, opts, std::move(done));
  };
}

}  // namespace corepool
