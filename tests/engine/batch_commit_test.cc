// `corepool batch` commits a finished file (its last events, the summary,
// fsync of the file and of its directory, rename) off the threads that deliver
// results. Before, the commit ran inside the completion of the file's last
// segment: on an engine thread in thread mode, under the batch driver's mutex,
// so every other result and the reader waited on the disk too (two fsyncs,
// about 1 ms on the VM this was measured on: with the default tagger, 84
// five-second files ran at 2227x real time against 3348x for one 600 s file).
//
// How the test sees where fsync runs: this binary defines fsync() itself,
// which the static corepool libraries linked into it call instead of libc's;
// it notes the calling thread and passes the call on to libc.
#include <dlfcn.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "supervisor/batch/batch.h"
#include "supervisor/batch/result_file.h"
#include "supervisor/pool/executor_factory.h"
#include "tests/support/temp_dir.h"
#include "tools/audio_synth.h"
#include "worker/model/model.h"

namespace {

std::mutex g_fsync_mu;
bool g_fsync_recording = false;
std::vector<std::thread::id> g_fsync_threads;

}  // namespace

extern "C" int fsync(int fd) {
  using Fsync = int (*)(int);
  static const Fsync libc_fsync = reinterpret_cast<Fsync>(::dlsym(RTLD_NEXT, "fsync"));
  {
    std::lock_guard<std::mutex> lock(g_fsync_mu);
    if (g_fsync_recording) g_fsync_threads.push_back(std::this_thread::get_id());
  }
  return libc_fsync(fd);
}

namespace corepool {
namespace {

constexpr int kFiles = 6;

TEST(BatchCommitTest, AFinishedFileIsCommittedOffTheThreadsThatDeliverResults) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "in");
  for (int i = 0; i < kFiles; ++i) {
    synth::write_audio(dir / ("in/f" + std::to_string(i) + ".wav"), synth::demo_of_seconds(4));
  }
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  Config config;
  config.mode = "thread";
  config.workers = 2;
  config.max_batch = 2;  // several batches per file: results keep coming while files finish
  const ExecutorFactory inner = make_executor_factory(config, model);

  std::mutex mu;
  std::set<std::thread::id> completion_threads;
  const ExecutorFactory noting = [&](Executor::Completion done) {
    return inner([&, done](SegmentResult&& r) {
      {
        std::lock_guard<std::mutex> lock(mu);
        completion_threads.insert(std::this_thread::get_id());
      }
      done(std::move(r));
    });
  };
  BatchOptions options;
  options.paths = {dir / "in"};
  options.out_dir = dir / "out";
  {
    std::lock_guard<std::mutex> lock(g_fsync_mu);
    g_fsync_threads.clear();
    g_fsync_recording = true;
  }
  const BatchStats stats = run_batch(options, model->config, noting);
  {
    std::lock_guard<std::mutex> lock(g_fsync_mu);
    g_fsync_recording = false;
  }

  // Every file committed before run_batch returned, and the count says so.
  EXPECT_EQ(stats.files_ok, static_cast<size_t>(kFiles));
  EXPECT_EQ(stats.files_failed, 0u);
  for (int i = 0; i < kFiles; ++i) {
    EXPECT_TRUE(result_is_complete(dir / ("out/f" + std::to_string(i) + ".wav.jsonl"))) << "file " << i;
  }
  // The premise: fsync was called (once for each file and once for its
  // directory), so the check below looks at real calls.
  ASSERT_GE(g_fsync_threads.size(), static_cast<size_t>(kFiles));
  ASSERT_FALSE(completion_threads.empty());
  for (const auto& t : g_fsync_threads) {
    EXPECT_EQ(completion_threads.count(t), 0u) << "an fsync ran on a thread that delivers results";
  }
}

}  // namespace
}  // namespace corepool
