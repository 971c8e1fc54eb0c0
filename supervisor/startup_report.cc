// One source of facts: the lines come from the doctor's own checks
// (supervisor/doctor/doctor_host.h), so the startup log and `corepool doctor` can
// never disagree. The checks that need the config's worker count or a model
// are left to the doctor.
#include "supervisor/startup_report.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "supervisor/doctor/doctor_host.h"
#include "worker/host/cpus.h"
#include "worker/log_format.h"
#include "worker/runtime.h"

namespace corepool {

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("corepool");
  logger->set_formatter(make_log_formatter("%^[%L]%$ %v"));
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

void log_host_facts() {
  // "" for the wanted allocator: ensure_allocator() has already logged why
  // jemalloc could not be preloaded, if that is what happened.
  for (const CheckResult& r : process_checks(intra_op_threads_now(), "")) {
    if (r.verdict == Verdict::kOk) {
      spdlog::info("{}: {}", r.name, r.found);
    } else {
      spdlog::warn("{}: {} (fix: {})", r.name, r.found, r.fix);
    }
  }
  const CpuBudget cpus = usable_cpus();
  spdlog::info("usable cpus: {} (affinity {}, cgroup quota {})", cpus.usable, cpus.allowed.size(),
               cpus.quota_cpus > 0 ? std::to_string(cpus.quota_cpus) : "none");
}

}  // namespace corepool
