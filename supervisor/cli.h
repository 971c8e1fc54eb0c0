// The command line of `corepool`: every subcommand and flag, declared with
// CLI11 and parsed into one plain struct. Called once, by main(); nothing
// outlives the parse but the struct. The commands, flags, defaults and help
// texts are a contract: the CLI tests and deploy/k8s's check read --help.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "supervisor/bench/bench_types.h"
#include "supervisor/bench/tune.h"
#include "supervisor/eval/eval.h"

namespace corepool {

enum class Command { kBatch, kMerge, kEval, kServe, kBench, kTune, kDoctor, kVersion };

// What the command line says. A config key's flag absent from config_flags
// was not given: the config file (or its default) decides (commands.cc).
struct Cli {
  Command command = Command::kVersion;
  std::string config_path;
  // The flags of config keys (config/config_keys.cc), by key name
  // ("engine.workers" -> "4"), as given; absent = not given.
  std::map<std::string, std::string> config_flags;
  bool no_progress = false;
  std::string format = "jsonl";
  std::string min_score;  // batch --min-score, as given (checked in commands.cc: exit 2 with one line)
  std::string merge_gap;  // batch --merge-gap SECONDS, as given
  int audio_stream = 0;  // batch --audio-stream
  // batch, stateful models only: override model.toml's [events], [labels]
  // threshold and [stateful] lane_seconds; as given, checked in commands.cc.
  std::map<std::string, std::string> stateful_flags;  // "--min-speech-ms" -> "300"
  std::string raw;       // batch --raw FORMAT:RATE:CHANNELS (stdin is headerless PCM)
  std::vector<std::string> paths;
  std::string shard;
  std::string manifest;
  std::string root;
  BenchOptions bench;       // --pin lands in bench.pin
  TuneOptions tune;
  EvalOptions eval;
};

// Fills `cli` from argv. Returns nullopt when a command is to run, else the
// code to exit with now, CLI11's message already printed: 0 after --help, its
// own code (105 and up) after a bad command line.
std::optional<int> parse_cli(int argc, char** argv, Cli& cli);

}  // namespace corepool
