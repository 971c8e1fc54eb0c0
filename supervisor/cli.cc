// One function per subcommand declares its flags, in the order --help lists
// them; the flags of config keys come from config/config_keys.cc's table, the
// inputs' are declared once. Options write straight into the Cli the caller owns, which is why the
// few callbacks (`each`) capture it by reference: they run inside parse().
#include "supervisor/cli.h"

#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "config/config_keys.h"

namespace corepool {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

// The flags of the config keys whose row names a command in `on`
// (config/config_keys.cc), in the table's order, with its help, range and
// choices. Each writes the text given into cli.config_flags, for commands.cc.
void add_config_flags(CLI::App* cmd, Cli& cli, unsigned on) {
  for (const ConfigKey& key : config_keys()) {
    if ((key.flag_on & on) == 0) continue;
    auto keep = [&cli, name = std::string(key.name)](const std::string& text) { cli.config_flags[name] = text; };
    if (key.type == KeyType::kBool) {
      cmd->add_flag_callback(key.flag, [keep] { keep("true"); }, key.flag_help);
    } else if (key.type == KeyType::kInt) {
      cmd->add_option_function<int>(key.flag, [keep](const int& n) { keep(std::to_string(n)); }, key.flag_help)
          ->check(CLI::Range(key.min, key.max));
    } else {
      CLI::Option* option = cmd->add_option_function<std::string>(key.flag, keep, key.flag_help);
      if (!key.choices.empty()) option->check(CLI::IsMember(key.choices));
    }
  }
}

void add_global_flags(CLI::App& app, Cli& cli) {
  app.add_option("--config", cli.config_path, "TOML config file (see config/corepool.toml)");
  add_config_flags(&app, cli, kFlagGlobal);
}

// The inputs of batch and merge: paths and/or a manifest; at least one.
void add_input_flags(CLI::App* cmd, Cli& cli) {
  auto* manifest = cmd->add_option("--manifest", cli.manifest, "file listing the inputs, one path per line");
  cmd->add_option("--root", cli.root, "with --manifest: results are named relative to this directory")
      ->needs(manifest);
  cmd->add_option("paths", cli.paths, "files, directories or glob patterns");
}

void add_batch_command(CLI::App& app, Cli& cli) {
  auto* batch = app.add_subcommand("batch", "tag audio files (\"-\": standard input): one result per input (JSON Lines or --format)");
  add_config_flags(batch, cli, kFlagBatch);
  batch->add_flag("--no-progress", cli.no_progress, "never draw the progress bar");
  batch->add_option("--format", cli.format,
                    "jsonl (default), csv, audacity (label track), raven (selection table), dcase (sed_eval event "
                    "list), or with --out - timeline (one readable line per event)");
  batch->add_option("--min-score", cli.min_score, "drop events scoring below this (0..1; default 0: keep all)");
  batch->add_option("--merge-gap", cli.merge_gap,
                    "SECONDS: join events of one label at most this far apart (score: the higher one)");
  // A stateful model's event rules and lanes (model.toml [events], [stateful]).
  for (const auto& [flag, help] : std::vector<std::pair<std::string, std::string>>{
           {"--threshold", "stateful model: speech on at this probability (model.toml [labels] threshold)"},
           {"--hysteresis", "stateful model: off below threshold minus this (default 0.15)"},
           {"--min-speech-ms", "stateful model: drop events not longer than this (default 250)"},
           {"--min-silence-ms", "stateful model: silences shorter than this do not end an event (default 100)"},
           {"--speech-pad-ms", "stateful model: pad each event by this on both sides (default 30)"},
           {"--lane-seconds", "stateful model: cut long files into lanes this long; 0 = exact, one stream per file"}}) {
    batch->add_option_function<std::string>(flag, [&cli, flag = flag](const std::string& v) { cli.stateful_flags[flag] = v; },
                                            help);
  }
  batch->add_option("--audio-stream", cli.audio_stream, "which audio stream of each input, from 0 (default: the first)")
      ->check(CLI::Range(0, 1000));
  batch->add_option("--raw", cli.raw,
                    "FORMAT:RATE:CHANNELS: standard input (\"-\") is headerless PCM, s16le or f32le, "
                    "e.g. s16le:16000:1");
  batch->add_option("--shard", cli.shard,
                    "I/N: process shard I (0..N-1) of N; default from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX");
  add_input_flags(batch, cli);
}

void add_merge_command(CLI::App& app, Cli& cli) {
  auto* merge = app.add_subcommand("merge", "one summary over a sharded batch's results; names missing inputs");
  add_config_flags(merge, cli, kFlagMerge);
  merge->get_option("--out")->description("the shards' output directory");
  add_input_flags(merge, cli);
}

void add_eval_command(CLI::App& app, Cli& cli) {
  auto* eval = app.add_subcommand("eval", "segment- and event-based F1 and error rate (DCASE, sed_eval's "
                                          "definitions) of batch results against reference annotations");
  eval->add_option("--reference", cli.eval.reference_dir, "directory of reference event lists (DCASE: "
                   "[filename<TAB>]onset<TAB>offset<TAB>label; .txt, .tsv or .ann)");
  eval->add_option("results", cli.eval.results_dir, "batch's --out directory (.jsonl or .tsv results)");
  eval->add_flag("--json", cli.eval.json, "one JSON object on stdout instead of the tables");
}

void add_serve_command(CLI::App& app, Cli& cli) {
  auto* serve = app.add_subcommand("serve", "HTTP service: KServe v2 infer, /v1/audio:tag, health, /metrics");
  add_config_flags(serve, cli, kFlagServe);
}

void add_bench_command(CLI::App& app, Cli& cli) {
  auto* bench = app.add_subcommand("bench", "measure thread and process mode against the bare forward() ceiling");
  add_config_flags(bench, cli, kFlagBench);
  BenchOptions& o = cli.bench;
  bench->add_flag("--quick", o.quick, "small sweep (about 1.5 minutes on 2 cpus): 2 repeats, 30 s of audio, "
                  "no bf16 point where the CPU has no bf16 unit")
      ->each([&o](const std::string&) {
        o.repeats = 2;
        o.audio_seconds = 30;
      });
  bench->add_option("--audio-seconds", o.audio_seconds, "length of the generated input (default 60)")
      ->check(CLI::Range(5.0, 36000.0));
  bench->add_option("--repeats", o.repeats, "interleaved repetitions (default 3)")->check(CLI::Range(1, 100));
  bench->add_option("--modes", o.modes, "kinds of point (default all): " + join(kBenchKinds))
      ->delimiter(',')->check(CLI::IsMember(kBenchKinds));
  bench->add_option("--worker-counts", o.worker_counts,
                    "engine threads / workers to sweep (default 1..2 x usable cpus; --memory: 1,2,4,8)")
      ->delimiter(',')->check(CLI::Range(1, 1024));
  bench->add_option("--intra-ops", o.intra_ops, "intra-op thread settings to sweep (default 1,2,cpus)")
      ->delimiter(',')->check(CLI::Range(1, 1024));
  bench->add_option("--allocators", o.allocators, "allocators to sweep (default jemalloc,system)")
      ->delimiter(',')->check(CLI::IsMember({"jemalloc", "system"}));
  bench->add_option("--out", o.out_dir, "where results.csv, results.json and the plots go");
  bench->add_flag("--replot", o.replot, "redraw the plots and the verdict from --out's results.json");
  bench->add_flag("--memory", o.memory, "PSS of shared vs naive weights for --worker-counts");
  bench->add_flag("--respawn", o.respawn, "with --memory: also SIGKILL-to-answer respawn latency");
  bench->add_flag("--bf16-agreement", o.bf16_agreement,
                  "bf16 vs fp32 label agreement and max score difference (held-out set and demo audio)");
  bench->add_flag("--pin,!--no-pin", o.pin, "pin workers to cpus");
  // The sweep's child processes: hidden from --help (empty group).
  bench->add_option("--point", o.point, "internal: run one measurement point")->group("");
  bench->add_option("--audio", o.audio, "internal: input of a throughput point")->group("");
  bench->add_flag("--naive", o.naive, "internal: memory point with private weight copies")->group("");
  bench->add_option("--winograd-chunks", o.winograd_chunks, "internal: a point's Winograd chunk sizes")->group("");
}

void add_tune_command(CLI::App& app, Cli& cli) {
  auto* tune = app.add_subcommand("tune", "search workers x intra-op x max batch; print the best [engine] settings");
  add_config_flags(tune, cli, kFlagTune);
  tune->get_option("--mode")->description("thread | process (default engine.mode)");
  TuneOptions& o = cli.tune;
  tune->add_option("--p99-ms", o.p99_ms, "best throughput whose p99 segment latency stays under this")
      ->check(CLI::PositiveNumber);
  tune->add_option("--worker-counts", o.worker_counts, "workers to try (default 1..2 x usable cpus)")
      ->delimiter(',')->check(CLI::Range(1, 1024));
  tune->add_option("--intra-ops", o.intra_ops, "intra-op threads to try (default 1,2,cpus)")
      ->delimiter(',')->check(CLI::Range(1, 1024));
  // tune searches engine.optimize too: its --optimize (not the key's flag) takes a list.
  tune->add_option("--optimize", o.optimizes, "engine.optimize values to try (default none,onednn, and bf16 where "
                   "the CPU has AVX512_BF16 or AMX-BF16)")
      ->delimiter(',')
      ->check(CLI::IsMember({"none", "onednn", "onednn-direct", "bf16"}));
  tune->add_option("--max-batches", o.max_batches, "max batch sizes to try (default 1,2,4,8,16)")
      ->delimiter(',')->check(CLI::Range(1, 1024));
  tune->add_option("--audio-seconds", o.audio_seconds, "audio per measurement (default 30)")
      ->check(CLI::Range(5.0, 36000.0));
  tune->add_option("--repeats", o.repeats, "measurements per configuration (default 1)")
      ->check(CLI::Range(1, 100));
}

void add_doctor_command(CLI::App& app, Cli& cli) {
  auto* doctor = app.add_subcommand("doctor", "the performance checklist: OK/WARN/FAIL per check, exit 0/1/2");
  add_config_flags(doctor, cli, kFlagDoctor);
}

Command command_of(const CLI::App& app) {
  if (app.got_subcommand("batch")) return Command::kBatch;
  if (app.got_subcommand("merge")) return Command::kMerge;
  if (app.got_subcommand("eval")) return Command::kEval;
  if (app.got_subcommand("serve")) return Command::kServe;
  if (app.got_subcommand("bench")) return Command::kBench;
  if (app.got_subcommand("tune")) return Command::kTune;
  if (app.got_subcommand("doctor")) return Command::kDoctor;
  return Command::kVersion;  // require_subcommand(1): the only one left
}

}  // namespace

std::optional<int> parse_cli(int argc, char** argv, Cli& cli) {
  CLI::App app{"corepool: LibTorch audio inference on every core"};
  app.require_subcommand(1);
  add_global_flags(app, cli);
  add_batch_command(app, cli);
  add_merge_command(app, cli);
  add_eval_command(app, cli);
  add_serve_command(app, cli);
  add_bench_command(app, cli);
  add_tune_command(app, cli);
  add_doctor_command(app, cli);
  app.add_subcommand("version", "print versions");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  cli.command = command_of(app);
  return std::nullopt;
}

}  // namespace corepool
