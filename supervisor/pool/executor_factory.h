// Builds the executor a Config asks for: N engine threads in this process
// (thread mode) or a pool of forked workers (process mode). Shared by batch,
// serve (once per generation: start and every reload) and main's logging.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "config/config.h"
#include "worker/engine_plan.h"
#include "worker/executor.h"
#include "worker/model/model.h"

namespace corepool {

// Builds an executor whose results go to the given callback.
using ExecutorFactory = std::function<std::unique_ptr<Executor>(Executor::Completion)>;

// engine.plan_cache as a directory: "" when "off" (or no environment names
// the default one).
std::string plan_cache_dir(const Config& config);

// Workers the config asks for: engine.workers, or one per usable cpu when 0.
int effective_workers(const Config& config);

// When the executor's constructor returns: once every engine is ready
// (serve: READY=1 means every worker is up), or in process mode once the
// first worker is (batch: the others take their share as they come up; in a
// Silero run of the 10-minute file the second was ready 2-50 ms after the
// first on a 2-cpu AMD EPYC Zen 5). Thread mode's engines start together.
enum class ExecutorStart { kAllReady, kFirstReady };

// Plans the engine first (worker/engine_plan.h: optimizes the model in place,
// measures max_batch when it is 0), then returns a factory that defers
// construction so that the caller chooses the completion callback. The plan
// is copied to `plan` when given. Throws ModelError when the model cannot run.
ExecutorFactory make_executor_factory(const Config& config, std::shared_ptr<const LoadedModel> model,
                                      EnginePlan* plan = nullptr, ExecutorStart start = ExecutorStart::kAllReady);

}  // namespace corepool
