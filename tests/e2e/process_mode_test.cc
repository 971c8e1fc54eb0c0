// `corepool batch --mode process` through the real binary: the same events as
// thread mode, workers killed mid-run (a few, then one every ~200 ms) change
// nothing, a SIGKILLed supervisor takes its workers and its shared memory with
// it, and a batch killed mid-run resumes on rerun with no partial result.
#include <signal.h>

#include <filesystem>
#include <algorithm>
#include <random>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tools/audio_synth.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;


// `model`: the tests that kill a process mid-run take CNN10, whose run lasts
// long enough for the kills (the small tagger's is over in a second or less).
std::vector<std::string> batch_args(const std::string& mode, const std::vector<std::string>& rest,
                                    const std::string& model = COREPOOL_DEFAULT_MODEL) {
  std::vector<std::string> args = {COREPOOL_BIN, "--log-level", "warn", "batch", "--model", model,
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
  auto clean = testing::run_process(batch_args("thread", {"--out", "-", dir / "long.wav"}, COREPOOL_CNN10_MODEL),
                                    dir.path());
  ASSERT_EQ(clean.exit_code, 0) << clean.err;

  const testing::Spawned child = testing::spawn_process(
      batch_args("process", {"--out", "-", dir / "long.wav"}, COREPOOL_CNN10_MODEL), dir.path());
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
      testing::spawn_process(batch_args("process", {"--out", dir / "out", dir / "long.wav"}, COREPOOL_CNN10_MODEL),
                             dir.path());
  const pid_t pid = child.pid;
  std::vector<int> workers;
  testing::wait_until([&] { return (workers = testing::child_pids(pid)).size() >= 2; }, std::chrono::seconds(60));
  ASSERT_EQ(workers.size(), 2u);
  ::kill(pid, SIGKILL);
  testing::wait_process(child, std::chrono::seconds(10));
  // The kernel kills each worker with its parent (PR_SET_PDEATHSIG); how soon
  // is the scheduler's business: the deadline bounds a failure, not a speed.
  for (int w : workers) {
    EXPECT_TRUE(testing::wait_until([&] { return !testing::process_alive(w); }, std::chrono::seconds(30)))
        << "worker " << w << " outlived its supervisor by 30 s";
  }
  const std::string prefix = "corepool." + std::to_string(pid) + ".";
  for (const auto& entry : fs::directory_iterator("/dev/shm")) {
    EXPECT_NE(entry.path().filename().string().rfind(prefix, 0), 0u) << entry.path();
  }
  EXPECT_FALSE(fs::exists(dir / "out/long.wav.jsonl")) << "a partial result under the final name";
}

// Kills a random worker of `pid` every ~200 ms until it exits or `max_kills`
// are done (a bound in count: each kill costs the run a respawn); returns the kills.
int kill_workers_until_exit(pid_t pid, int max_kills) {
  std::mt19937 rng(6);
  int kills = 0;
  while (testing::process_alive(pid) && kills < max_kills) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // pacing the faults, not synchronising
    const std::vector<int> workers = testing::child_pids(pid);
    if (workers.empty()) continue;
    const int victim = workers[rng() % workers.size()];
    if (testing::process_alive(victim) && ::kill(victim, SIGKILL) == 0) ++kills;
  }
  return kills;
}

TEST(ProcessModeTest, AWorkerKilledEvery200msDuringABatchChangesNoOutputFile) {
  testing::TempDir dir;
  const std::vector<std::string> names = {"a.wav", "b.wav", "c.wav"};
  synth::write_audio(dir / "a.wav", synth::demo_of_seconds(100));
  synth::write_audio(dir / "b.wav", synth::demo_of_seconds(80, 22050));
  synth::write_audio(dir / "c.wav", synth::demo_of_seconds(60, 44100));
  std::vector<std::string> inputs;
  for (const auto& n : names) inputs.push_back(dir / n);
  auto args = [&](const std::string& mode, const std::string& out) {
    std::vector<std::string> rest = {"--out", out};
    rest.insert(rest.end(), inputs.begin(), inputs.end());
    return batch_args(mode, rest, COREPOOL_CNN10_MODEL);
  };
  auto clean = testing::run_process(args("thread", dir / "clean"), dir.path());
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  const auto t0 = std::chrono::steady_clock::now();
  const testing::Spawned child = testing::spawn_process(args("process", dir / "chaos"), dir.path());
  const int kills = kill_workers_until_exit(child.pid, 40);
  auto r = testing::wait_process(child, std::chrono::seconds(300));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& n : names) {
    const auto want = event_lines(testing::read_file(dir / ("clean/" + n + ".jsonl")));
    EXPECT_GT(want.size(), 0u) << n;
    EXPECT_EQ(event_lines(testing::read_file(dir / ("chaos/" + n + ".jsonl"))), want) << n;
  }
  std::printf("[ chaos    ] batch: 240 s of audio in 3 files, %d workers SIGKILLed in %.1f s, 3 of 3 outputs equal "
              "the clean run's\n", kills, seconds);
  EXPECT_GE(kills, 10) << "the batch ended before the chaos could hit it";
}

// Every result under its final name is complete: "summary" is its last line.
bool final_results_complete(const std::string& out_dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 6 || name.substr(name.size() - 6) != ".jsonl") continue;  // temp files are .jsonl.tmp.PID
    const auto lines = testing::lines_of(testing::read_file(e.path().string()));
    if (lines.empty() || !json::parse(lines.back()).contains("summary")) return false;
  }
  return true;
}

TEST(ProcessModeTest, ABatchKilledMidRunResumesOnRerunAndNeverShowsAPartialResult) {
  testing::TempDir dir;
  synth::write_audio(dir / "a.wav", synth::demo_of_seconds(20));
  synth::write_audio(dir / "b.wav", synth::demo_of_seconds(240));
  const std::string out = dir / "out";
  const auto args = batch_args("process", {"--out", out, dir / "a.wav", dir / "b.wav"}, COREPOOL_CNN10_MODEL);
  const testing::Spawned child = testing::spawn_process(args, dir.path());
  bool complete = true;
  ASSERT_TRUE(testing::wait_until([&] {
    complete = complete && final_results_complete(out);
    return fs::exists(out + "/a.wav.jsonl") || !testing::process_alive(child.pid);
  }, std::chrono::seconds(120)));
  ASSERT_TRUE(testing::process_alive(child.pid)) << "the run ended before the kill";
  ::kill(child.pid, SIGKILL);  // mid b.wav
  testing::wait_process(child, std::chrono::seconds(10));
  EXPECT_TRUE(complete && final_results_complete(out)) << "a partial result under a final name";
  EXPECT_FALSE(fs::exists(out + "/b.wav.jsonl"));
  const std::string a_before = testing::read_file(out + "/a.wav.jsonl");
  std::vector<std::string> rerun_args = args;
  rerun_args[2] = "info";  // the skip is an info line
  auto rerun = testing::run_process(rerun_args, dir.path());
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  EXPECT_THAT(rerun.err, ::testing::HasSubstr("skipped 1 file(s) whose result is already complete"));
  EXPECT_EQ(testing::read_file(out + "/a.wav.jsonl"), a_before);
  EXPECT_TRUE(final_results_complete(out));
  EXPECT_TRUE(fs::exists(out + "/b.wav.jsonl"));
  for (const auto& e : fs::directory_iterator(out)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << "left behind: " << e.path();
  }
}

}  // namespace
}  // namespace corepool
