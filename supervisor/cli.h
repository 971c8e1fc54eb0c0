// The command line of `corepool`: every subcommand and flag, declared with
// CLI11 and parsed into one plain struct. Called once, by main(); nothing
// outlives the parse but the struct. The commands, flags, defaults and help
// texts are a contract: the CLI tests and deploy/k8s's check read --help.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "supervisor/bench/bench_types.h"
#include "supervisor/bench/tune.h"

namespace corepool {

enum class Command { kBatch, kMerge, kServe, kBench, kTune, kDoctor, kVersion };

// What the command line says. Empty strings and negative numbers mean "not
// given": the config file (or its default) decides (commands.cc).
struct Cli {
  Command command = Command::kVersion;
  std::string config_path;
  std::string log_level;
  std::string model_dir;
  std::string mode;
  std::string allocator;
  int workers = -1;
  int max_batch = -1;  // -1: not given (0 is "measured")
  std::string optimize;
  int intra = -1;
  int inter = -1;
  std::string out_dir;
  bool force = false;
  bool no_progress = false;
  std::string format = "jsonl";
  int audio_stream = 0;  // batch --audio-stream
  std::vector<std::string> paths;
  std::string shard;
  std::string manifest;
  std::string root;
  std::string listen;
  std::string unix_socket;
  bool listen_set = false;  // --listen given, even as "" (no TCP listener)
  std::string grpc_listen;
  bool grpc_listen_set = false;  // --grpc-listen given, even as "" (no gRPC)
  BenchOptions bench;       // --pin lands in bench.pin
  TuneOptions tune;
};

// Fills `cli` from argv. Returns nullopt when a command is to run, else the
// code to exit with now, CLI11's message already printed: 0 after --help, its
// own code (105 and up) after a bad command line.
std::optional<int> parse_cli(int argc, char** argv, Cli& cli);

}  // namespace corepool
