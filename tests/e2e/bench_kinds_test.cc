// Smoke run of every kind of `corepool bench` point through the real binary,
// at the smallest sizes that still measure something: both ceilings, both
// pipelines, LibTorch's defaults, plain and bf16 in one sweep, then the memory
// comparison with the respawn latency. Each kind must come back with a
// positive number; plain must run what it names (no optimization, batch 4).
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/engine/small_model.h"
#include "tests/e2e/corepool_cli.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

using testing::corepool_cli;


const std::vector<std::string> kKinds = {"ceiling-threads", "ceiling-processes", "thread", "process", "defaults",
                                         "plain", "bf16"};

TEST(BenchKindsTest, EveryThroughputKindRunsAndReportsAPositiveRate) {
  testing::TempDir dir;
  const std::string model = testing::small_model_dir(dir);
  const auto r = corepool_cli({"bench", "--model", model, "--modes",
                               "ceiling-threads,ceiling-processes,thread,process,defaults,plain,bf16",
                               "--worker-counts", "1",
                               "--intra-ops", "1", "--allocators", "system", "--audio-seconds", "5", "--repeats", "1",
                               "--no-pin", "--out", dir / "out"},
                              dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // results.csv: a header and one row per kind, its rate a positive number.
  const auto csv = testing::lines_of(testing::read_file(dir / "out/results.csv"));
  ASSERT_EQ(csv.size(), 1u + kKinds.size()) << testing::read_file(dir / "out/results.csv");
  const auto header = csv[0];
  ASSERT_THAT(header, ::testing::StartsWith("kind,workers,intra_op,allocator,runs,segments,seconds,"));
  std::set<std::string> csv_kinds;
  for (size_t i = 1; i < csv.size(); ++i) {
    std::vector<std::string> cells;
    std::stringstream ss(csv[i]);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    ASSERT_GT(cells.size(), 10u) << csv[i];
    csv_kinds.insert(cells[0]);
    EXPECT_GT(std::stod(cells[10]), 0) << "segments_per_s of " << csv[i];  // the 11th column
  }
  EXPECT_EQ(csv_kinds, std::set<std::string>(kKinds.begin(), kKinds.end()));
  // results.json: the same kinds, each with a rate and a latency.
  const json results = json::parse(testing::read_file(dir / "out/results.json"));
  std::set<std::string> json_kinds;
  for (const auto& p : results.at("points")) {
    json_kinds.insert(p.at("kind").get<std::string>());
    EXPECT_GT(p.at("segments_per_s").get<double>(), 0) << p.dump();
    EXPECT_GT(p.at("latency_ms").at("p50").get<double>(), 0) << p.dump();
    EXPECT_GT(p.at("segments").get<double>(), 0) << p.dump();
    EXPECT_GE(p.at("batch").get<int>(), 1) << p.dump();
    if (p.at("kind") == "plain") {
      EXPECT_EQ(p.at("optimize"), "none") << p.dump();
      EXPECT_EQ(p.at("batch"), 4) << p.dump();
    }
  }
  EXPECT_EQ(json_kinds, std::set<std::string>(kKinds.begin(), kKinds.end()));
  // stdout: one progress line per point with its rate.
  for (const auto& kind : kKinds) {
    const std::regex line("repeat 1  " + kind + " w1 [^\\n]* ([0-9.]+) segments/s");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, line)) << kind << " in\n" << r.out;
    EXPECT_GT(std::stod(m[1]), 0) << kind;
  }
  // Where onednn runs Winograd layers (AVX-512), their chunk sizes are measured
  // once for the sweep, and every onednn point runs at exactly those.
  std::smatch plan;
  if (std::regex_search(r.out, plan, std::regex("measured once for every onednn point: [^\\n]*items per call ([0-9,]+)"))) {
    for (const std::string kind : {"ceiling-threads", "ceiling-processes", "thread", "process"}) {
      std::smatch m;
      ASSERT_TRUE(std::regex_search(r.out, m, std::regex("repeat 1  " + kind + " w1 [^\\n]* items per call ([0-9,]+)")))
          << kind << " in\n" << r.out;
      EXPECT_EQ(m[1].str(), plan[1].str()) << kind;
    }
  }
}

TEST(BenchKindsTest, APointWithChunkSizesOutOfRangeSaysWhichAndWhere) {
  testing::TempDir dir;
  const std::string model = testing::small_model_dir(dir);
  const auto r = corepool_cli({"bench", "--point", "thread", "--model", model, "--audio", dir / "none.wav",
                               "--winograd-chunks", "2,0,8"},
                              dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out + r.err, HasSubstr("--winograd-chunks: \"0\" in \"2,0,8\" is not a size from 1 to 8"));
}

TEST(BenchKindsTest, TheMemoryComparisonAndTheRespawnLatencyPrintTheirNumbers) {
  testing::TempDir dir;
  const std::string model = testing::small_model_dir(dir);
  const auto r = corepool_cli({"bench", "--memory", "--respawn", "--model", model, "--worker-counts", "1,2"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // A row per worker count: the batch, shared PSS, naive PSS (MB) and their ratio.
  for (const std::string n : {"1", "2"}) {
    const std::regex row("\\n +" + n + " +[0-9]+ +([0-9.]+) +([0-9.]+) +([0-9.]+) ");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, row)) << "no row for " << n << " workers in\n" << r.out;
    EXPECT_GT(std::stod(m[1]), 0) << m[0];
    EXPECT_GT(std::stod(m[2]), 0) << m[0];
    EXPECT_GT(std::stod(m[3]), 0) << m[0];
  }
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("weights: ([0-9.]+) MB"))) << r.out;
  EXPECT_GT(std::stod(m[1]), 0);
  const std::regex respawn("20 kills: median ([0-9.]+) ms, min ([0-9.]+) ms, max ([0-9.]+) ms");
  ASSERT_TRUE(std::regex_search(r.out, m, respawn)) << r.out;
  EXPECT_GT(std::stod(m[1]), 0);
  EXPECT_LE(std::stod(m[2]), std::stod(m[1]));
  EXPECT_LE(std::stod(m[1]), std::stod(m[3]));
  // Every kill is printed, in order: 20 figures.
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("each kill, in order \\(ms\\):(( [0-9.]+)+)\\n"))) << r.out;
  std::stringstream each(m[1].str());
  int kills = 0;
  for (double v; each >> v; ++kills) EXPECT_GT(v, 0);
  EXPECT_EQ(kills, 20);
}

}  // namespace
}  // namespace corepool
