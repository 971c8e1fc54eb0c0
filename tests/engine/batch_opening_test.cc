// `corepool batch` queues the run's first segments (half the executor's
// queue) at once. Submitted one by one, the first segment woke an idle engine
// that ran it alone: a batch of one, cold, at about twice the cost per segment
// of a full batch (CNN10: 17-23 ms for one item against 8.4-9.5 ms per item in a
// batch of 8), while the reader decoded the next segment for the other engine.
// The test looks at what the engines ran: the batch of every engine's first
// forward() (SegmentTiming::batch of the segments at 0 and at max_batch).
// A stateful model's driver opens the files that fit before their lanes go
// out: the first chunks of all of them share the first call.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/model_config.h"
#include "supervisor/batch/batch.h"
#include "supervisor/pool/executor_factory.h"
#include "tests/support/silero_model.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"
#include "tools/audio_synth.h"
#include "worker/model/model.h"

namespace corepool {
namespace {

constexpr int kMaxBatch = 4;

// Segment index -> items in the forward() that ran it, for one batch run.
std::map<uint64_t, uint32_t> batch_of_each_segment(const std::string& mode, const std::string& wav,
                                                   const std::string& out) {
  auto model = load_model(COREPOOL_DEFAULT_MODEL);
  Config config;
  config.mode = mode;
  config.workers = 2;
  config.max_batch = kMaxBatch;  // queue depth 4 x 2 x 4 = 32: an opening group of 16
  const ExecutorFactory inner = make_executor_factory(config, model);
  std::mutex mu;
  std::map<uint64_t, uint32_t> batch_of;
  const ExecutorFactory noting = [&](Executor::Completion done) {
    return inner([&, done](SegmentResult&& r) {
      {
        std::lock_guard<std::mutex> lock(mu);
        batch_of[r.index] = r.timing.batch;
      }
      done(std::move(r));
    });
  };
  BatchOptions options;
  options.paths = {wav};
  options.out_dir = out;
  const BatchStats stats = run_batch(options, model->config, noting);
  EXPECT_EQ(stats.files_ok, 1u);
  return batch_of;
}

void expect_full_first_batches(const std::string& mode) {
  testing::TempDir dir;
  const std::string wav = dir / "demo.wav";
  synth::write_audio(wav, synth::demo_of_seconds(30));
  // One segment, then one per hop until the end is covered: 57 of 2 s at a 0.5 s hop.
  const ModelConfig c = load_model_config(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml");
  const auto segments = static_cast<size_t>(1 + std::ceil((30.0 - c.segment_seconds) / c.hop_seconds));
  const auto batch_of = batch_of_each_segment(mode, wav, dir / "out");
  ASSERT_EQ(batch_of.size(), segments);
  // The reader's first segment, and the first one the other engine could
  // take: each opened a full batch.
  EXPECT_EQ(batch_of.at(0), static_cast<uint32_t>(kMaxBatch)) << mode << " mode ran the first segment in a batch of "
                                                              << batch_of.at(0);
  EXPECT_EQ(batch_of.at(kMaxBatch), static_cast<uint32_t>(kMaxBatch))
      << mode << " mode ran segment " << kMaxBatch << " in a batch of " << batch_of.at(kMaxBatch);
}

TEST(BatchOpeningTest, ThreadModeStartsEveryEngineOnAFullBatch) { expect_full_first_batches("thread"); }

// Eight 2 s clips of the demo in `dir`, their results to dir/out.
BatchOptions eight_clips(const testing::TempDir& dir) {
  BatchOptions options;
  for (int i = 0; i < 8; ++i) {
    const std::string wav = dir / ("clip" + std::to_string(i) + ".wav");
    synth::write_audio(wav, synth::demo_of_seconds(2));
    options.paths.push_back(wav);
  }
  options.out_dir = dir / "out";
  return options;
}

// Regular files under `dir` (none if it does not exist).
std::vector<std::string> files_under(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file()) found.push_back(it->path().string());
  }
  return found;
}

// A stateful model's files (Silero VAD) open together, all that fit the
// queue, before their lanes go out: the first chunk of each of 8 files runs in
// one call. Sent as each file opened, the first file's chunk ran alone.
TEST(BatchOpeningTest, AStatefulModelsFilesOpenTogetherAndTheirFirstChunksShareOneCall) {
  SKIP_WITHOUT_SILERO();
  testing::TempDir dir;
  const BatchOptions options = eight_clips(dir);
  auto model = load_model(testing::kSileroDir);
  Config config;
  config.mode = "thread";
  config.workers = 1;
  config.max_batch = 16;  // queue depth 4 x 1 x 16: room for every file's lane
  const ExecutorFactory inner = make_executor_factory(config, model);
  std::mutex mu;
  std::vector<uint32_t> first_chunk_batches;
  const ExecutorFactory noting = [&](Executor::Completion done) {
    return inner([&, done](SegmentResult&& r) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (r.index == 0) first_chunk_batches.push_back(r.timing.batch);
      }
      done(std::move(r));
    });
  };
  ModelConfig one_lane = model->config;
  one_lane.stateful.lane_seconds = 0;  // a lane per file, whose first chunk is chunk 0
  one_lane.stateful.split = {};        // the method chunk by chunk (the split's fronts batch by themselves)
  const BatchStats stats = run_batch(options, one_lane, noting);
  EXPECT_EQ(stats.files_ok, 8u);
  ASSERT_EQ(first_chunk_batches.size(), 8u);
  for (const uint32_t b : first_chunk_batches) EXPECT_EQ(b, 8u) << "a file's first chunk ran in a call of " << b;
}

// A stateful run opens its first files while the engines start. Engines that
// fail to start (here once all 8 files have their temporary result file) fail
// the run with their error, and the files opened meanwhile leave no temporary
// result file behind.
TEST(BatchOpeningTest, EnginesThatFailToStartLeaveNoTemporaryFileOfTheFilesOpenedMeanwhile) {
  SKIP_WITHOUT_SILERO();
  testing::TempDir dir;
  const BatchOptions options = eight_clips(dir);
  auto model = load_model(testing::kSileroDir);
  std::atomic<bool> all_opened{false};
  const ExecutorFactory failing = [&](Executor::Completion) -> std::unique_ptr<Executor> {
    all_opened = testing::wait_until([&] { return files_under(options.out_dir).size() == 8; },
                                     std::chrono::seconds(10));
    throw std::runtime_error("engine 0 failed to start");
  };
  EXPECT_THROW(
      {
        try {
          run_batch(options, model->config, failing);
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "engine 0 failed to start");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_TRUE(all_opened) << "the 8 files did not open while the engines started";
  const std::vector<std::string> left = files_under(options.out_dir);
  EXPECT_TRUE(left.empty()) << left.size() << " file(s) left, the first " << left.front();
}

TEST(BatchOpeningTest, ProcessModeStartsEveryWorkerOnAFullBatch) { expect_full_first_batches("process"); }

}  // namespace
}  // namespace corepool
