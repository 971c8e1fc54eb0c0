// Each command's glue: flags into its room's options, and the few checks that
// need the command line itself (inputs given, --format against --out). The
// rooms do the work; nothing here outlives the command.
#include "supervisor/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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
#include "supervisor/eval/eval.h"
#include "supervisor/pool/executor_factory.h"
#include "supervisor/serve/serve.h"
#include "worker/host/allocator_child.h"
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

// `text` as a finite number in [low, high], else one error line naming the flag.
std::optional<double> number_flag(const char* flag, const std::string& text, double low, double high,
                                  const char* expected) {
  char* end = nullptr;
  const double value = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (std::isfinite(value) && end != nullptr && *end == '\0' && value >= low && value <= high) return value;
  spdlog::error("{} {}: expected {}", flag, text, expected);
  return std::nullopt;
}

// --format, --min-score and --merge-gap; false after one error line.
bool output_options(const Cli& cli, const Config& cfg, BatchOptions& batch) {
  const std::optional<OutputFormat> format = output_format_named(cli.format);
  if (!format) {
    spdlog::error("--format {}: expected one of {}", cli.format, output_format_names());
    return false;
  }
  batch.format = *format;
  if (batch.format == OutputFormat::kTimeline && cfg.out_dir != "-") {
    spdlog::error("--format timeline prints to a terminal: it needs --out - (result files: jsonl, csv, audacity, "
                  "raven or dcase)");
    return false;
  }
  if (!cli.min_score.empty()) {
    const auto score = number_flag("--min-score", cli.min_score, 0.0, 1.0, "a score from 0 to 1");
    if (!score) return false;
    batch.filter.min_score = *score;
  }
  if (!cli.merge_gap.empty()) {
    const auto gap = number_flag("--merge-gap", cli.merge_gap, 0.0, 1e9, "a number of seconds >= 0");
    if (!gap) return false;
    batch.filter.merge_gap = *gap;
  }
  return true;
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
  if (!output_options(cli, cfg, batch)) return std::nullopt;
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

// The stateful flags onto `model` (a copy of the model's config, used by the
// batch driver for events and lanes); false after one error line.
bool apply_stateful_flags(const Cli& cli, ModelConfig& model) {
  if (cli.stateful_flags.empty()) return true;
  if (!model.is_stateful()) {
    spdlog::error("{}: only for a stateful model ([model] kind = \"stateful\"); {} is not one",
                  cli.stateful_flags.begin()->first, model.name);
    return false;
  }
  for (const auto& [flag, text] : cli.stateful_flags) {
    const bool ms = flag.size() > 3 && flag.compare(flag.size() - 3, 3, "-ms") == 0;
    const double high = flag == "--threshold" || flag == "--hysteresis" ? 1.0 : 1e7;
    const auto value = number_flag(flag.c_str(), text, 0.0, high, ms ? "milliseconds >= 0" : "a number in range");
    if (!value) return false;
    if (flag == "--threshold") model.thresholds.assign(model.labels.size(), static_cast<float>(*value));
    if (flag == "--hysteresis") model.rules.hysteresis = *value;
    if (flag == "--min-speech-ms") model.rules.min_speech_ms = static_cast<int>(*value);
    if (flag == "--min-silence-ms") model.rules.min_silence_ms = static_cast<int>(*value);
    if (flag == "--speech-pad-ms") model.rules.speech_pad_ms = static_cast<int>(*value);
    if (flag == "--lane-seconds") model.stateful.lane_seconds = *value;
  }
  if (model.stateful.lane_seconds > 0 && model.stateful.lane_warmup_seconds >= model.stateful.lane_seconds) {
    spdlog::error("--lane-seconds {}: must be longer than the model's lane_warmup_seconds {}",
                  model.stateful.lane_seconds, model.stateful.lane_warmup_seconds);
    return false;
  }
  return true;
}

ExitCode run_batch_command(const Config& cfg, const Cli& cli) {
  // A batch run never idles, so jemalloc's background thread has nothing to
  // give back and only takes the engines' cpus: woken by the run's frees, it
  // made 2,000-39,000 context switches in one thread-mode Silero run of the
  // 10-minute file (141-156 without) and cost 5-27 % of its speed (AMD EPYC Zen 4).
  stop_allocator_background_thread();
  if (!has_inputs(cli, "batch")) return ExitCode::kUsage;
  std::optional<BatchOptions> batch = batch_options(cfg, cli);
  if (!batch) return ExitCode::kUsage;
  auto model = load_model(cfg.model_dir);
  ModelConfig config = model->config;
  if (!apply_stateful_flags(cli, config)) return ExitCode::kUsage;
  const ExecutorFactory factory = make_executor_factory(cfg, model, nullptr, ExecutorStart::kFirstReady);
  const BatchStats stats = run_batch(*batch, config, factory);
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

ExitCode run_eval_command(const Cli& cli) {
  if (cli.eval.reference_dir.empty() || cli.eval.results_dir.empty()) {
    std::fprintf(stderr, "corepool eval: give --reference REF_DIR and the results directory\n");
    return ExitCode::kUsage;
  }
  return run_eval(cli.eval, stdout, stderr);
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
