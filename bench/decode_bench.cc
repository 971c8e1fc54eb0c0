// corepool-decode-bench: what `corepool batch` spends on its side of the
// model for each input, on one thread: opening a file (validation, FFmpeg's
// probe, the header, the decoder) and decoding it to mono samples at the
// model's rate, in AudioStream's 32,768-frame blocks, as the batch driver
// reads them. On 2 cpus this is cpu the engines do not get: 200 files of 3 s
// cost far more than one file of their 10 minutes (bench/RESULTS.md), and this
// says how much, without the model. One run, one line per pass: the best of
// --reps passes over the files (the last line) is what to compare.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "audio/audio_stream.h"
#include "bench/tool_main.h"
#include "supervisor/pool/allocator.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Pass {
  double open_s = 0, all_s = 0;
  size_t samples = 0;
};

Pass one_pass(const std::vector<std::string>& files, int rate) {
  Pass p;
  const auto start = Clock::now();
  std::vector<float> block;
  for (const std::string& path : files) {
    const auto opening = Clock::now();
    AudioStream stream(path, rate);
    p.open_s += seconds_since(opening);
    while (stream.read(block)) {
      p.samples += block.size();
      block.clear();
    }
  }
  p.all_s = seconds_since(start);
  return p;
}

int run_main(int argc, char** argv) {
  std::vector<std::string> files;
  int rate = 16000, reps = 3;
  std::string allocator = "jemalloc";
  CLI::App app{"corepool-decode-bench: open and decode audio files as `corepool batch` does, one thread"};
  app.add_option("files", files, "audio files")->required()->check(CLI::ExistingFile);
  app.add_option("--rate", rate, "the model's sample rate (Hz)")->check(CLI::Range(8000, 96000));
  app.add_option("--reps", reps, "passes over the files")->check(CLI::Range(1, 100));
  app.add_option("--allocator", allocator, "jemalloc (as corepool runs) or system")
      ->check(CLI::IsMember({"jemalloc", "system"}));
  CLI11_PARSE(app, argc, argv);
  // On the allocator and MALLOC_CONF `corepool batch` decodes on (the
  // user's MALLOC_CONF still wins, as there).
  if (allocator == "jemalloc") ::setenv("MALLOC_CONF", kBatchMallocConf, 0);
  if (const std::string problem = ensure_allocator(allocator, argv); !problem.empty()) {
    throw std::runtime_error("cannot run on " + allocator + ": " + problem);
  }
  const double n = static_cast<double>(files.size());
  const auto print = [&](const char* which, const Pass& p) {
    const double audio = static_cast<double>(p.samples) / rate;
    std::printf("decode, 1 thread, %s, %s: %zu file(s), %.1f s of audio: open %.1f ms (%.0f us a file), "
                "open + decode %.1f ms (%.0f us a file, %.0fx real time)\n",
                allocator_in_use().c_str(), which, files.size(), audio, p.open_s * 1e3, p.open_s * 1e6 / n,
                p.all_s * 1e3, p.all_s * 1e6 / n, p.all_s > 0 ? audio / p.all_s : 0.0);
  };
  Pass best;
  for (int r = 0; r < reps; ++r) {
    const Pass p = one_pass(files, rate);
    print(("pass " + std::to_string(r + 1)).c_str(), p);
    if (r == 0 || p.all_s < best.all_s) best = p;
  }
  print("best pass", best);
  return 0;
}

}  // namespace
}  // namespace corepool

int main(int argc, char** argv) {
  return corepool::tool_main("corepool-decode-bench", corepool::run_main, argc, argv);
}
