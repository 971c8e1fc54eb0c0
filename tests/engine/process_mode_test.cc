// `corepool batch --mode process` through the real binary: the same events as
// thread mode, workers killed mid-run change nothing, and a SIGKILLed
// supervisor takes its workers and its shared memory with it.
#include <filesystem>
#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/engine/test_support.h"
#include "tools/audio_synth.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;


std::vector<std::string> batch_args(const std::string& mode, const std::vector<std::string>& rest) {
  std::vector<std::string> args = {COREPOOL_BIN, "--log-level", "warn", "batch", "--model", COREPOOL_DEFAULT_MODEL,
                                   "--mode", mode, "--workers", "2", "--no-progress"};
  args.insert(args.end(), rest.begin(), rest.end());
  return args;
}

// Event lines only (the summary carries wall-clock figures).
std::vector<std::string> event_lines(const std::string& out) {
  std::vector<std::string> events;
  for (const auto& line : testing::lines_of(out)) {
    if (!json::parse(line).contains("summary")) events.push_back(line);
  }
  return events;
}

TEST(ProcessModeTest, WritesTheSameEventsAsThreadMode) {
  testing::TempDir dir;
  synth::write_audio(dir / "a.wav", synth::demo_of_seconds(60, 22050));
  synth::write_audio(dir / "b.wav", synth::demo_of_seconds(30));
  auto thread = testing::run_process(batch_args("thread", {"--out", "-", dir / "a.wav", dir / "b.wav"}), dir.path());
  auto process = testing::run_process(batch_args("process", {"--out", "-", dir / "a.wav", dir / "b.wav"}), dir.path());
  ASSERT_EQ(thread.exit_code, 0) << thread.err;
  ASSERT_EQ(process.exit_code, 0) << process.err;
  auto a = event_lines(thread.out), b = event_lines(process.out);
  std::sort(a.begin(), a.end());  // two files interleave differently; each file stays ordered
  std::sort(b.begin(), b.end());
  EXPECT_GT(a.size(), 0u);
  EXPECT_EQ(a, b);
}

TEST(ProcessModeTest, KillingWorkersMidRunChangesNoResult) {
  testing::TempDir dir;
  synth::write_audio(dir / "long.wav", synth::demo_of_seconds(240));
  auto clean = testing::run_process(batch_args("thread", {"--out", "-", dir / "long.wav"}), dir.path());
  ASSERT_EQ(clean.exit_code, 0) << clean.err;

  const testing::Spawned child = testing::spawn_process(batch_args("process", {"--out", "-", dir / "long.wav"}), dir.path());
  const pid_t pid = child.pid;
  int kills = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (kills < 8 && std::chrono::steady_clock::now() < deadline && testing::process_alive(pid)) {
    std::vector<int> children;
    if (!testing::wait_until([&] { return (children = testing::child_pids(pid)).size() == 2 || !testing::process_alive(pid); },
                             std::chrono::seconds(30)) ||
        children.size() != 2) {
      break;
    }
    const int victim = children[kills % 2];
    ::kill(victim, SIGKILL);
    ++kills;
    // The next kill waits for this one's replacement: the pool is whole again.
    testing::wait_until([&] {
      const std::vector<int> now = testing::child_pids(pid);
      return !testing::process_alive(pid) ||
             (now.size() == 2 && std::find(now.begin(), now.end(), victim) == now.end());
    }, std::chrono::seconds(30));
  }
  auto r = testing::wait_process(child, std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(kills, 3) << "the run ended before the workers could be killed";
  EXPECT_EQ(event_lines(r.out), event_lines(clean.out));
}

TEST(ProcessModeTest, AKilledSupervisorTakesItsWorkersAndSharedMemoryWithIt) {
  testing::TempDir dir;
  synth::write_audio(dir / "long.wav", synth::demo_of_seconds(600));
  const testing::Spawned child =
      testing::spawn_process(batch_args("process", {"--out", dir / "out", dir / "long.wav"}), dir.path());
  const pid_t pid = child.pid;
  std::vector<int> workers;
  testing::wait_until([&] { return (workers = testing::child_pids(pid)).size() >= 2; }, std::chrono::seconds(60));
  ASSERT_EQ(workers.size(), 2u);
  ::kill(pid, SIGKILL);
  testing::wait_process(child, std::chrono::seconds(10));
  const auto killed = std::chrono::steady_clock::now();
  for (int w : workers) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        killed + std::chrono::seconds(1) - std::chrono::steady_clock::now());
    testing::wait_until([&] { return !testing::process_alive(w); }, std::max(left, std::chrono::milliseconds(0)));
    EXPECT_FALSE(testing::process_alive(w)) << "worker " << w << " outlived its supervisor by 1 s";
  }
  const std::string prefix = "corepool." + std::to_string(pid) + ".";
  for (const auto& entry : fs::directory_iterator("/dev/shm")) {
    EXPECT_NE(entry.path().filename().string().rfind(prefix, 0), 0u) << entry.path();
  }
  EXPECT_FALSE(fs::exists(dir / "out/long.wav.jsonl")) << "a partial result under the final name";
}

}  // namespace
}  // namespace corepool
