// `corepool bench` and `corepool tune` end to end on a tiny sweep: each point
// a real child process with the allocator it names, real LibTorch inference,
// results.csv / results.json / gnuplot PNGs written, and tune's snippet a
// config file corepool itself accepts.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "tests/e2e/corepool_cli.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tools/audio_synth.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

using testing::corepool_cli;

TEST(BenchCliTest, ASmallSweepWritesCsvJsonPlotsAndAVerdict) {
  testing::TempDir dir;
  const auto r = corepool_cli({"bench", "--model", COREPOOL_DEFAULT_MODEL, "--modes", "thread,defaults,process",
                               "--worker-counts", "1,2", "--intra-ops", "1", "--allocators", "jemalloc,system",
                               "--audio-seconds", "5", "--repeats", "1", "--out", dir / "out"},
                              dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("On this host (")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("LibTorch defaults are ")) << r.out;
  const auto csv = testing::lines_of(testing::read_file(dir / "out/results.csv"));
  ASSERT_EQ(csv.size(), 1u + 3 * 2 * 2);  // header + kinds x worker counts x allocators
  const json results = json::parse(testing::read_file(dir / "out/results.json"));
  ASSERT_EQ(results["points"].size(), 12u);
  for (const auto& p : results["points"]) {
    EXPECT_GT(p["segments_per_s"].get<double>(), 0) << p.dump();
    EXPECT_GT(p["latency_ms"]["p99"].get<double>(), 0) << p.dump();
    EXPECT_GE(p["latency_ms"]["p99"].get<double>(), p["latency_ms"]["p50"].get<double>());
    EXPECT_GT(p["cpu_util"].get<double>(), 0);
    EXPECT_GT(p["pss_mb"]["peak"].get<double>(), 10);
    EXPECT_FALSE(p["memory_over_time"]["samples"].empty());
    // jemalloc's own counters where it runs, none on glibc.
    EXPECT_EQ(p["jemalloc_bytes"].contains("resident"), p["allocator"] == "jemalloc") << p.dump();
  }
  EXPECT_FALSE(results["verdict"].empty());
  for (const char* png : {"processing-time.png", "cpu-utilization.png", "throughput.png", "memory-over-time.png"}) {
    EXPECT_GT(std::filesystem::file_size(dir / ("out/" + std::string(png))), 1000u) << png;
  }
}

TEST(BenchCliTest, EveryPointRunsOnTheAllocatorItNames) {
  testing::TempDir dir;
  const std::string audio = dir / "in.wav";
  synth::write_audio(audio, synth::demo_of_seconds(5, 16000));
  for (const std::string alloc : {"jemalloc", "system"}) {
    const auto r = corepool_cli({"--allocator", alloc, "bench", "--point", "process", "--audio", audio, "--model",
                                 COREPOOL_DEFAULT_MODEL, "--workers", "1"},
                                dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json point = json::parse(r.out);
    EXPECT_EQ(point["allocator"], alloc);
    EXPECT_EQ(point["kind"], "process");
  }
}

// CNN10 in process mode, one worker with two intra-op threads, the Winograd
// chunks a sweep had chosen: every run failed with "WinogradConv: no
// transformed weights for a chunk of 1" (oneDNN picked a weights layout at the
// worker's two threads that the supervisor's pass had not made). Without
// oneDNN's Winograd kernels (AVX2-only CPUs) the chunks are not used and this
// passes either way.
TEST(BenchCliTest, AProcessWorkerWithTwoIntraOpThreadsRunsEveryWinogradChunk) {
  testing::TempDir dir;
  const std::string audio = dir / "in.wav";
  synth::write_audio(audio, synth::demo_of_seconds(8, 16000));
  const auto r = corepool_cli({"bench", "--point", "process", "--audio", audio, "--model", COREPOOL_CNN10_MODEL,
                               "--workers", "1", "--intra-op-threads", "2", "--optimize", "onednn", "--max-batch", "16",
                               "--winograd-chunks", "2,2,1,1,1,8,1,1"},
                              dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["kind"], "process");
}

TEST(BenchCliTest, TunePrintsAConfigSnippetCorepoolAccepts) {
  testing::TempDir dir;
  const auto r = corepool_cli({"tune", "--model", COREPOOL_DEFAULT_MODEL, "--mode", "process", "--worker-counts",
                               "1,2", "--intra-ops", "1", "--optimize", "none,bf16", "--max-batches", "1,4",
                               "--audio-seconds", "5"},
                              dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto at = r.out.find("# corepool tune,");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string snippet = r.out.substr(at);
  {
    std::ofstream(dir / "tuned.toml") << snippet;
  }
  const Config cfg = load_config(dir / "tuned.toml");
  EXPECT_EQ(cfg.mode, "process");
  EXPECT_TRUE(cfg.workers == 1 || cfg.workers == 2) << snippet;
  EXPECT_TRUE(cfg.max_batch == 1 || cfg.max_batch == 4) << snippet;
  EXPECT_EQ(cfg.intra_op_threads, 1);
  // engine.optimize is a dimension: only the values asked for are tried (the default is onednn).
  EXPECT_TRUE(cfg.optimize == "none" || cfg.optimize == "bf16") << snippet;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr(" onednn "))) << r.out;
}

TEST(BenchCliTest, TuneSaysSoWhenNoConfigurationMeetsTheLatencyBound) {
  testing::TempDir dir;
  const auto r = corepool_cli({"tune", "--model", COREPOOL_DEFAULT_MODEL, "--mode", "thread", "--worker-counts", "1",
                               "--intra-ops", "1", "--max-batches", "4", "--audio-seconds", "5", "--p99-ms", "0.001"},
                              dir);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.out, HasSubstr("no configuration keeps p99 under 0.001 ms"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("[engine]")));
}

}  // namespace
}  // namespace corepool
