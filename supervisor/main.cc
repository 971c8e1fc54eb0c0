// corepool: one binary, several subcommands. main() reads like a startup
// script: parse the command line, load the config, pick the allocator, set up
// logging, fix LibTorch's thread counts before the first op, log the host
// facts, run the command. Each step that ends the run says why and exits with
// its code (worker/exit_codes.h, the README's table).
#include <optional>
#include <string>

#include <spdlog/spdlog.h>

#include "supervisor/cli.h"
#include "supervisor/commands.h"
#include "supervisor/doctor/doctor.h"
#include "supervisor/pool/allocator.h"
#include "supervisor/startup_report.h"
#include "worker/exit_codes.h"
#include "worker/runtime.h"

using corepool::Command;
using corepool::ExitCode;
using corepool::exit_status;

int main(int argc, char** argv) {
  corepool::Cli cli;
  if (const std::optional<int> done = corepool::parse_cli(argc, argv, cli)) return *done;  // --help, bad flags
  if (cli.command == Command::kVersion) return exit_status(corepool::print_version());
  const std::optional<corepool::Config> cfg = corepool::load_effective_config(cli);
  if (!cfg) return exit_status(ExitCode::kUsage);
  // Read only: before the allocator re-exec, and they never load the model.
  if (cli.command == Command::kMerge) return exit_status(corepool::run_merge_command(*cfg, cli));
  if (cli.command == Command::kEval) return exit_status(corepool::run_eval_command(cli));
  // May re-execute this binary (same pid, same argv) with jemalloc preloaded.
  const std::string allocator_problem = corepool::ensure_allocator(cfg->allocator, argv);
  corepool::setup_logging(cfg->log_level);
  if (!allocator_problem.empty()) spdlog::warn("allocator: {}", allocator_problem);
  // Process mode's supervisor optimizes and calibrates the model before it
  // forks: one thread, so that no OpenMP pool exists at fork (workers set
  // their own counts). Thread mode's engines are this process's threads.
  corepool::configure_runtime_threads(
      {cfg->mode == "process" && cli.command != Command::kBench ? 1 : cfg->intra_op_threads, cfg->inter_op_threads});
  if (cli.command == Command::kDoctor) return exit_status(corepool::print_doctor_report(*cfg));
  corepool::log_host_facts();
  return exit_status(corepool::run_engine_command(*cfg, cli));
}
