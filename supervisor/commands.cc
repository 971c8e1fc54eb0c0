// Each command's glue: flags into its room's options, and the few checks that
// need the command line itself (inputs given, --format against --out). The
// rooms do the work; nothing here outlives the command.
#include "supervisor/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <filesystem>
#include <string>

#include <spdlog/spdlog.h>

#include "config/config_keys.h"
#include "supervisor/batch/batch.h"
#include "supervisor/batch/manifest.h"
#include "supervisor/batch/merge.h"
#include "supervisor/bench/bench.h"
#include "supervisor/bench/tune.h"
#include "supervisor/pool/executor_factory.h"
#include "supervisor/serve/serve.h"
#include "worker/model/model.h"
#include "worker/runtime.h"

namespace corepool {
namespace {

// The bundled model: ./models/default when run from the source tree, else the installed copy.
std::string resolve_model_dir(const std::string& dir) {
  if (dir != "models/default" || std::filesystem::exists(dir)) return dir;
  return COREPOOL_DEFAULT_MODEL_DIR;
}

// Throws ConfigError. Also what serve re-runs on SIGHUP, with the same flags.
Config effective_config(const Cli& cli) {
  Config cfg = cli.config_path.empty() ? Config{} : load_config(cli.config_path);
  for (const ConfigKey& key : config_keys()) {  // the table's order: the first bad address is reported
    const auto flag = cli.config_flags.find(key.name);
    if (flag != cli.config_flags.end()) set_from_flag(key, flag->second, cfg);  // throws ConfigError
  }
  cfg.model_dir = resolve_model_dir(cfg.model_dir);
  return cfg;
}

bool has_inputs(const Cli& cli, const char* command) {
  if (!cli.paths.empty() || !cli.manifest.empty()) return true;
  std::fprintf(stderr, "corepool %s: give input paths or --manifest FILE\n", command);
  return false;
}

// The shard (flag, else the scheduler's variables) and the flags' options; no model yet.
std::optional<BatchOptions> batch_options(const Config& cfg, const Cli& cli) {
  BatchOptions batch;
  try {
    batch.shard = resolve_shard(cli.shard, process_environment());
  } catch (const ShardError& e) {
    spdlog::error("{}", e.what());
    return std::nullopt;
  }
  if (batch.shard.sharded()) spdlog::info("shard {} (from {})", batch.shard.name(), batch.shard.source);
  batch.paths = cli.paths;
  batch.manifest = cli.manifest;
  batch.root = cli.root;
  batch.out_dir = cfg.out_dir;
  batch.force = cfg.force;
  batch.progress = !cli.no_progress && ::isatty(STDERR_FILENO);
  batch.timeline = cli.format == "timeline";
  batch.audio_stream = cli.audio_stream;
  if (cli.raw.empty()) return batch;
  try {
    batch.raw = parse_raw_pcm(cli.raw);
  } catch (const std::invalid_argument& e) {
    spdlog::error("--raw {}: {}", cli.raw, e.what());
    return std::nullopt;
  }
  if (std::find(cli.paths.begin(), cli.paths.end(), kStdinArg) == cli.paths.end()) {
    spdlog::error("--raw describes standard input: name it as \"-\" among the inputs");
    return std::nullopt;
  }
  return batch;
}

ExitCode run_batch_command(const Config& cfg, const Cli& cli) {
  if (!has_inputs(cli, "batch")) return ExitCode::kUsage;
  std::optional<BatchOptions> batch = batch_options(cfg, cli);
  if (!batch) return ExitCode::kUsage;
  auto model = load_model(cfg.model_dir);
  const ExecutorFactory factory = make_executor_factory(cfg, model);
  if (batch->timeline && batch->out_dir != "-") {
    spdlog::error("--format timeline prints to a terminal: it needs --out - (result files are always JSON Lines)");
    return ExitCode::kUsage;
  }
  const BatchStats stats = run_batch(*batch, model->config, factory);
  if (stats.files_skipped > 0) {
    spdlog::info("skipped {} file(s) whose result is already complete (--force redoes them)", stats.files_skipped);
  }
  spdlog::info("{} file(s) done, {} failed, {:.1f} s of audio in {:.2f} s ({:.1f}x real time)",
               stats.files_ok, stats.files_failed, stats.audio_seconds, stats.wall_seconds,
               stats.wall_seconds > 0 ? stats.audio_seconds / stats.wall_seconds : 0.0);
  return stats.exit_code();
}

ExitCode run_serve_command(const Config& cfg, const Cli& cli) {
  ServeOptions options;
  options.config = cfg;
  options.reload_config = [cli] {
    Config next = effective_config(cli);
    check_mode_keys(next);
    return next;
  };
  return run_serve(options);
}

}  // namespace

std::optional<Config> load_effective_config(const Cli& cli) {
  try {
    Config cfg = effective_config(cli);
    // bench and tune run both modes from one config: only batch and serve run one.
    if (cli.command == Command::kBatch || cli.command == Command::kServe) check_mode_keys(cfg);
    return cfg;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "corepool: config error: %s\n", e.what());
    return std::nullopt;
  }
}

ExitCode print_version() {
  std::printf("corepool %s (LibTorch %s)\n", COREPOOL_VERSION, libtorch_version().c_str());
  return ExitCode::kOk;
}

ExitCode run_merge_command(const Config& cfg, const Cli& cli) {
  if (!has_inputs(cli, "merge")) return ExitCode::kUsage;
  MergeOptions merge;
  merge.out_dir = cfg.out_dir;
  merge.paths = cli.paths;
  merge.manifest = cli.manifest;
  merge.root = cli.root;
  try {
    return print_merge(merge_results(merge), merge.out_dir, stdout, stderr);
  } catch (const ManifestError& e) {
    std::fprintf(stderr, "corepool: %s\n", e.what());
    return ExitCode::kUsage;
  }
}

ExitCode run_engine_command(const Config& cfg, const Cli& cli) {
  try {
    if (cli.command == Command::kBatch) return run_batch_command(cfg, cli);
    if (cli.command == Command::kServe) return run_serve_command(cfg, cli);
    if (cli.command == Command::kTune) return run_tune_command(cli.tune, cfg);
    return run_bench_command(cli.bench, cfg);
  } catch (const ManifestError& e) {
    spdlog::error("{}", e.what());
    return ExitCode::kUsage;
  } catch (const ModelError& e) {
    spdlog::error("model error: {}", e.what());
    return ExitCode::kModelError;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return ExitCode::kInternal;
  }
}

}  // namespace corepool
