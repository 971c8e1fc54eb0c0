// corepool: one binary, several subcommands. main() reads like a startup
// script: parse flags, load config, set up logging, fix LibTorch's thread counts
// before the first op, log the host facts, run the command.
// Exit codes (a contract, see README): 0 ok, 1 some inputs failed, 2 usage or
// config error, 3 model error, 4 internal error; `doctor`: 0/1/2 = the worst
// line is OK/WARN/FAIL; `tune`: 1 = no configuration met --p99-ms; `merge`:
// 1 = some input has no complete result.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "config/config.h"
#include "supervisor/pool/allocator.h"
#include "supervisor/batch/batch.h"
#include "supervisor/bench/bench.h"
#include "supervisor/doctor/doctor.h"
#include "supervisor/pool/executor_factory.h"
#include "supervisor/batch/manifest.h"
#include "supervisor/batch/merge.h"
#include "supervisor/pool/process_pool.h"
#include "supervisor/serve/serve.h"
#include "supervisor/startup_report.h"
#include "supervisor/bench/tune.h"
#include "worker/cpus.h"
#include "worker/model.h"
#include "worker/runtime.h"
#include "worker/thread_executor.h"

namespace {

enum ExitCode { kOk = 0, kInputsFailed = 1, kUsage = 2, kModelError = 3, kInternal = 4 };

struct Cli {
  std::string config_path;
  std::string log_level;
  std::string model_dir;
  std::string mode;
  std::string allocator;
  int workers = -1;
  int max_batch = 0;
  int intra = -1;
  int inter = -1;
  std::string out_dir;
  bool force = false;
  bool no_progress = false;
  std::string format = "jsonl";
  bool pin = true;
  std::vector<std::string> paths;
  std::string shard;
  std::string manifest;
  std::string root;
  std::string listen;
  std::string unix_socket;
  bool listen_set = false;
  corepool::BenchOptions bench;
  corepool::TuneOptions tune;
};

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("corepool");
  logger->set_pattern("%^[%L]%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

// The bundled model: ./models/default when run from the source tree, else the installed copy.
std::string resolve_model_dir(const std::string& dir) {
  if (dir != "models/default" || std::filesystem::exists(dir)) return dir;
  return COREPOOL_DEFAULT_MODEL_DIR;
}

corepool::Config effective_config(const Cli& cli) {
  corepool::Config cfg = cli.config_path.empty() ? corepool::Config{} : corepool::load_config(cli.config_path);
  if (!cli.log_level.empty()) cfg.log_level = cli.log_level;
  if (!cli.model_dir.empty()) cfg.model_dir = cli.model_dir;
  if (!cli.mode.empty()) cfg.mode = cli.mode;
  if (!cli.allocator.empty()) cfg.allocator = cli.allocator;
  if (cli.workers >= 0) cfg.workers = cli.workers;
  if (cli.max_batch > 0) cfg.max_batch = cli.max_batch;
  if (cli.intra >= 0) cfg.intra_op_threads = cli.intra;
  if (cli.inter >= 0) cfg.inter_op_threads = cli.inter;
  if (!cli.out_dir.empty()) cfg.out_dir = cli.out_dir;
  if (cli.force) cfg.force = true;
  if (cli.listen_set) {
    if (!cli.listen.empty()) corepool::parse_host_port(cli.listen, "--listen");  // throws ConfigError
    cfg.listen = cli.listen;
  }
  if (!cli.unix_socket.empty()) cfg.unix_socket = cli.unix_socket;
  cfg.model_dir = resolve_model_dir(cfg.model_dir);
  return cfg;
}

bool has_inputs(const Cli& cli, const char* command) {
  if (!cli.paths.empty() || !cli.manifest.empty()) return true;
  std::fprintf(stderr, "corepool %s: give input paths or --manifest FILE\n", command);
  return false;
}

int run_batch_command(const corepool::Config& cfg, const Cli& cli) {
  if (!has_inputs(cli, "batch")) return kUsage;
  corepool::BatchOptions batch;
  try {
    batch.shard = corepool::resolve_shard(cli.shard, corepool::process_environment());
  } catch (const corepool::ShardError& e) {
    spdlog::error("{}", e.what());
    return kUsage;
  }
  if (batch.shard.sharded()) spdlog::info("shard {} (from {})", batch.shard.name(), batch.shard.source);
  auto model = corepool::load_model(cfg.model_dir);
  const corepool::ExecutorFactory factory = corepool::make_executor_factory(cfg, model);
  batch.paths = cli.paths;
  batch.manifest = cli.manifest;
  batch.root = cli.root;
  batch.out_dir = cfg.out_dir;
  batch.force = cfg.force;
  batch.progress = !cli.no_progress && ::isatty(STDERR_FILENO);
  batch.timeline = cli.format == "timeline";
  if (batch.timeline && batch.out_dir != "-") {
    spdlog::error("--format timeline prints to a terminal: it needs --out - (result files are always JSON Lines)");
    return kUsage;
  }
  const corepool::BatchStats stats = corepool::run_batch(batch, model->config, factory);
  if (stats.files_skipped > 0) {
    spdlog::info("skipped {} file(s) whose result is already complete (--force redoes them)",
                 stats.files_skipped);
  }
  spdlog::info("{} file(s) done, {} failed, {:.1f} s of audio in {:.2f} s ({:.1f}x real time)",
               stats.files_ok, stats.files_failed, stats.audio_seconds, stats.wall_seconds,
               stats.wall_seconds > 0 ? stats.audio_seconds / stats.wall_seconds : 0.0);
  return stats.exit_code() == 0 ? kOk : kInputsFailed;
}

// Reads only: runs before the allocator re-exec and never loads the model.
int run_merge_command(const corepool::Config& cfg, const Cli& cli) {
  if (!has_inputs(cli, "merge")) return kUsage;
  corepool::MergeOptions merge;
  merge.out_dir = cfg.out_dir;
  merge.paths = cli.paths;
  merge.manifest = cli.manifest;
  merge.root = cli.root;
  try {
    return corepool::print_merge(corepool::merge_results(merge), merge.out_dir, stdout, stderr);
  } catch (const corepool::ManifestError& e) {
    std::fprintf(stderr, "corepool: %s\n", e.what());
    return kUsage;
  }
}

int run_serve_command(const corepool::Config& cfg, const Cli& cli) {
  corepool::ServeOptions options;
  options.config = cfg;
  options.reload_config = [cli] {
    corepool::Config next = effective_config(cli);
    corepool::check_mode_keys(next);
    return next;
  };
  return corepool::run_serve(options);
}

void add_engine_flags(CLI::App* cmd, Cli& cli) {
  cmd->add_option("--model", cli.model_dir, "model directory (model.pt + model.toml)");
  cmd->add_option("--workers", cli.workers, "engine threads / workers; 0 = usable cpus")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--max-batch", cli.max_batch, "segments per forward()")->check(CLI::Range(1, 1024));
  cmd->add_option("--intra-op-threads", cli.intra, "LibTorch intra-op threads (1 = pool off, 0 = LibTorch default)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--inter-op-threads", cli.inter, "LibTorch inter-op threads (0 = LibTorch default)")
      ->check(CLI::Range(0, 1024));
}

// The inputs of batch and merge: paths and/or a manifest; at least one.
void add_input_flags(CLI::App* cmd, Cli& cli) {
  auto* manifest = cmd->add_option("--manifest", cli.manifest, "file listing the inputs, one path per line");
  cmd->add_option("--root", cli.root, "with --manifest: results are named relative to this directory")
      ->needs(manifest);
  cmd->add_option("paths", cli.paths, "files, directories or glob patterns");
}


}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"corepool: LibTorch audio inference on every core"};
  app.require_subcommand(1);
  Cli cli;
  app.add_option("--config", cli.config_path, "TOML config file (see config/corepool.toml)");
  app.add_option("--log-level", cli.log_level, "trace|debug|info|warn|error|off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_option("--allocator", cli.allocator, "jemalloc | system (glibc); default engine.allocator")
      ->check(CLI::IsMember({"jemalloc", "system"}));

  auto* batch = app.add_subcommand("batch", "tag audio files: one JSON Lines result per input");
  add_engine_flags(batch, cli);
  batch->add_option("--out", cli.out_dir, "output directory, or - for stdout");
  batch->add_option("--mode", cli.mode, "thread | process")->check(CLI::IsMember({"thread", "process"}));
  batch->add_flag("--force", cli.force, "redo inputs whose result is already complete");
  batch->add_flag("--no-progress", cli.no_progress, "never draw the progress bar");
  batch->add_option("--format", cli.format, "with --out -: jsonl (default) or timeline (one readable line per event)")
      ->check(CLI::IsMember({"jsonl", "timeline"}));
  batch->add_option("--shard", cli.shard,
                    "I/N: process shard I (0..N-1) of N; default from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX");
  add_input_flags(batch, cli);

  auto* merge = app.add_subcommand("merge", "one summary over a sharded batch's results; names missing inputs");
  merge->add_option("--out", cli.out_dir, "the shards' output directory");
  add_input_flags(merge, cli);

  auto* serve = app.add_subcommand("serve", "HTTP service: KServe v2 infer, /v1/audio:tag, health, /metrics");
  add_engine_flags(serve, cli);
  serve->add_option("--mode", cli.mode, "thread | process")->check(CLI::IsMember({"thread", "process"}));
  serve->add_option("--listen", cli.listen, "TCP host:port ([v6]:port), \"\" for none; default serve.listen")
      ->each([&cli](const std::string&) { cli.listen_set = true; });
  serve->add_option("--unix", cli.unix_socket, "also listen on this Unix socket path (mode 0660)");

  auto* bench = app.add_subcommand("bench", "measure thread and process mode against the bare forward() ceiling");
  add_engine_flags(bench, cli);
  bench->add_flag("--quick", cli.bench.quick, "small sweep (about 1.5 minutes on 2 cpus): 2 repeats, 30 s of audio")
      ->each([&cli](const std::string&) {
        cli.bench.repeats = 2;
        cli.bench.audio_seconds = 30;
      });
  bench->add_option("--audio-seconds", cli.bench.audio_seconds, "length of the generated input (default 60)")
      ->check(CLI::Range(5.0, 36000.0));
  bench->add_option("--repeats", cli.bench.repeats, "interleaved repetitions (default 3)")->check(CLI::Range(1, 100));
  bench->add_option("--modes", cli.bench.modes, "kinds of point (default all): " + join(corepool::kBenchKinds))
      ->delimiter(',')->check(CLI::IsMember(corepool::kBenchKinds));
  bench->add_option("--worker-counts", cli.bench.worker_counts,
                    "engine threads / workers to sweep (default 1..2 x usable cpus; --memory: 1,2,4,8)")
      ->delimiter(',')->check(CLI::Range(1, 1024));
  bench->add_option("--intra-ops", cli.bench.intra_ops, "intra-op thread settings to sweep (default 1,2,cpus)")
      ->delimiter(',')->check(CLI::Range(1, 1024));
  bench->add_option("--allocators", cli.bench.allocators, "allocators to sweep (default jemalloc,system)")
      ->delimiter(',')->check(CLI::IsMember({"jemalloc", "system"}));
  bench->add_option("--out", cli.bench.out_dir, "where results.csv, results.json and the plots go");
  bench->add_flag("--replot", cli.bench.replot, "redraw the plots and the verdict from --out's results.json");
  bench->add_flag("--memory", cli.bench.memory, "PSS of shared vs naive weights for --worker-counts");
  bench->add_flag("--respawn", cli.bench.respawn, "with --memory: also SIGKILL-to-answer respawn latency");
  bench->add_flag("--pin,!--no-pin", cli.pin, "pin workers to cpus");
  bench->add_option("--point", cli.bench.point, "internal: run one measurement point")->group("");
  bench->add_option("--audio", cli.bench.audio, "internal: input of a throughput point")->group("");
  bench->add_flag("--naive", cli.bench.naive, "internal: memory point with private weight copies")->group("");

  auto* tune = app.add_subcommand("tune", "search workers x intra-op x max batch; print the best [engine] settings");
  add_engine_flags(tune, cli);
  tune->add_option("--mode", cli.mode, "thread | process (default engine.mode)")
      ->check(CLI::IsMember({"thread", "process"}));
  tune->add_option("--p99-ms", cli.tune.p99_ms, "best throughput whose p99 segment latency stays under this")
      ->check(CLI::PositiveNumber);
  tune->add_option("--worker-counts", cli.tune.worker_counts, "workers to try (default 1..2 x usable cpus)")
      ->delimiter(',')->check(CLI::Range(1, 1024));
  tune->add_option("--intra-ops", cli.tune.intra_ops, "intra-op threads to try (default 1,2,cpus)")
      ->delimiter(',')->check(CLI::Range(1, 1024));
  tune->add_option("--max-batches", cli.tune.max_batches, "max batch sizes to try (default 1,2,4,8,16)")
      ->delimiter(',')->check(CLI::Range(1, 1024));
  tune->add_option("--audio-seconds", cli.tune.audio_seconds, "audio per measurement (default 30)")
      ->check(CLI::Range(5.0, 36000.0));
  tune->add_option("--repeats", cli.tune.repeats, "measurements per configuration (default 1)")
      ->check(CLI::Range(1, 100));

  auto* doctor = app.add_subcommand("doctor", "the performance checklist: OK/WARN/FAIL per check, exit 0/1/2");
  add_engine_flags(doctor, cli);
  doctor->add_option("--mode", cli.mode, "thread | process")->check(CLI::IsMember({"thread", "process"}));
  app.add_subcommand("version", "print versions");
  CLI11_PARSE(app, argc, argv);

  if (app.got_subcommand("version")) {
    std::printf("corepool %s (LibTorch %s)\n", COREPOOL_VERSION, corepool::libtorch_version().c_str());
    return kOk;
  }
  corepool::Config cfg;
  try {
    cfg = effective_config(cli);
    // bench and tune run both modes from one config: only batch and serve run one.
    if (app.got_subcommand("batch") || app.got_subcommand("serve")) corepool::check_mode_keys(cfg);
  } catch (const corepool::ConfigError& e) {
    std::fprintf(stderr, "corepool: config error: %s\n", e.what());
    return kUsage;
  }
  if (app.got_subcommand("merge")) return run_merge_command(cfg, cli);
  // May re-execute this binary (same pid, same argv) with jemalloc preloaded.
  const std::string allocator_problem = corepool::ensure_allocator(cfg.allocator, argv);
  setup_logging(cfg.log_level);
  if (!allocator_problem.empty()) spdlog::warn("allocator: {}", allocator_problem);
  corepool::configure_runtime_threads({cfg.intra_op_threads, cfg.inter_op_threads});
  if (app.got_subcommand("doctor")) return corepool::print_doctor_report(cfg);  // 0 OK, 1 WARN, 2 FAIL
  corepool::log_host_facts();
  try {
    if (app.got_subcommand("batch")) return run_batch_command(cfg, cli);
    if (app.got_subcommand("serve")) return run_serve_command(cfg, cli);
    cli.bench.model_dir = cfg.model_dir;
    cli.bench.workers = cfg.workers;
    cli.bench.max_batch = cfg.max_batch;
    cli.bench.pin = cfg.pin_threads && cli.pin;
    if (app.got_subcommand("tune")) {
      cli.tune.model_dir = cfg.model_dir;
      cli.tune.mode = cfg.mode;
      cli.tune.allocator = cfg.allocator;
      cli.tune.pin = cfg.pin_threads;
      return corepool::run_tune(cli.tune);
    }
    if (!cli.bench.point.empty()) return corepool::run_bench_point(cli.bench, cfg);
    return corepool::run_bench(cli.bench);
  } catch (const corepool::ManifestError& e) {
    spdlog::error("{}", e.what());
    return kUsage;
  } catch (const corepool::ModelError& e) {
    spdlog::error("model error: {}", e.what());
    return kModelError;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return kInternal;
  }
}
