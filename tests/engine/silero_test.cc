// Silero VAD (a published stateful model, ../shared/models/silero-vad) through
// corepool's stateful path: StreamScorer + the executor that `corepool batch`
// makes, in thread and process mode, at batch 1 and batched across streams.
// The reference is independent of our engine: LibTorch runs the TOP-LEVEL
// module's forward(x [1, 512], 16000) in a loop, which keeps its own state and
// context; every chunk's probability must match within 1e-5. Without the .jit
// the tests skip and say why. The audio is espeak-ng speech with silence and
// noise around it (lengths that are not whole chunks), about 12 s in all.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <torch/script.h>

#include "tests/support/silero_model.h"

#include "config/config.h"
#include "supervisor/batch/stream_scorer.h"
#include "supervisor/pool/executor_factory.h"
#include "supervisor/pool/process_pool.h"
#include "tools/speech_synth.h"
#include "worker/model/model.h"
#include "worker/model/torch_module.h"
#include "worker/optimize/optimize.h"
#include "worker/shared_weights.h"

namespace corepool {
namespace {

const std::string& kDir = testing::kSileroDir;

// Three streams: speech then silence, noise then speech, speech alone.
const std::vector<std::vector<float>>& streams() {
  static const std::vector<std::vector<float>> all = [] {
    std::mt19937 rng(7);
    std::normal_distribution<float> noise(0.0f, 0.02f);
    std::vector<float> a = synth::speak("The quick brown fox jumps over the lazy dog.", {}, 16000);
    a.resize(a.size() + 12345, 0.0f);
    std::vector<float> b(9000);
    for (float& x : b) x = noise(rng);
    synth::Voice german;
    german.language = "de";
    const std::vector<float> said = synth::speak("Zwei Katzen schlafen auf dem Sofa.", german, 16000);
    b.insert(b.end(), said.begin(), said.end());
    synth::Voice female;
    female.language = "en-us";
    female.variant = "f2";
    std::vector<float> c = synth::speak("one two three", female, 16000);
    return std::vector<std::vector<float>>{a, b, c};
  }();
  return all;
}

// The top-level module as its authors call it: forward(x [1, 512], 16000) in
// a loop (it keeps state and context), the last chunk zero-padded.
std::vector<float> reference(const std::vector<float>& samples) {
  static torch::jit::Module module = torch::jit::load(kDir + "/model.pt");
  c10::InferenceMode guard;
  module.run_method("reset_states");
  std::vector<float> probs;
  for (size_t at = 0; at < samples.size(); at += 512) {
    torch::Tensor x = torch::zeros({1, 512});
    std::copy(samples.begin() + at, samples.begin() + std::min(samples.size(), at + 512), x.data_ptr<float>());
    probs.push_back(module.forward({x, 16000}).toTensor().item<float>());
  }
  return probs;
}

struct Scored {
  std::vector<std::vector<float>> scores;  // per stream, per chunk (one label)
  uint32_t largest_batch = 0;
  uint64_t redispatched = 0;
  bool killed = false;
};

// Every stream through corepool at once; kill_after > 0 kills worker 0 (process
// mode) once that many chunks are in.
// engine.optimize "onednn" (the default) runs the method frozen; "none" as loaded.
Scored through_corepool(const std::string& mode, int workers, int max_batch, int kill_after = 0,
                        const std::string& optimize = "onednn") {
  auto model = load_model(kDir);
  Config config;
  config.optimize = optimize;
  config.model_dir = kDir;
  config.mode = mode;
  config.workers = workers;
  config.max_batch = max_batch;
  config.log_level = "warn";
  ModelConfig exact = model->config;
  exact.stateful.lane_seconds = 0;  // one stream per file: the module's exact scores
  Scored out;
  out.scores.resize(streams().size());
  std::mutex mu;
  StreamScorer scorer(exact, [&](uint64_t id, std::vector<float> s, const std::string& error) {
    EXPECT_EQ(error, "");
    out.scores[id] = std::move(s);
  });
  std::atomic<int> chunks{0};
  std::vector<int> pids;
  std::unique_ptr<Executor> executor = make_executor_factory(config, model)([&](SegmentResult&& r) {
    {
      std::lock_guard<std::mutex> lock(mu);
      out.largest_batch = std::max(out.largest_batch, r.timing.batch);
      if (++chunks == kill_after) out.killed = ::kill(pids.at(0), SIGKILL) == 0;
    }
    scorer.on_complete(std::move(r));
  });
  if (mode == "process") pids = static_cast<ProcessPool&>(*executor).worker_pids();
  for (size_t i = 0; i < streams().size(); ++i) {
    scorer.add(i, std::make_shared<const std::vector<float>>(streams()[i]));
  }
  scorer.attach(executor.get());  // as the batch driver does: thread mode's calls go on from their engines
  while (scorer.pump(*executor)) {
  }
  executor->wait_idle();
  scorer.attach(nullptr);
  out.redispatched = executor->stats().redispatched;
  return out;
}

void expect_matches_reference(const Scored& got) {
  double worst = 0;
  for (size_t i = 0; i < streams().size(); ++i) {
    const std::vector<float> want = reference(streams()[i]);
    ASSERT_EQ(got.scores[i].size(), want.size()) << "stream " << i;
    for (size_t c = 0; c < want.size(); ++c) {
      worst = std::max(worst, std::abs(static_cast<double>(got.scores[i][c]) - want[c]));
      ASSERT_NEAR(got.scores[i][c], want[c], 1e-5) << "stream " << i << " chunk " << c;
    }
  }
  std::printf("max |probability difference| against the top-level module: %.3g\n", worst);
}

TEST(SileroTest, ThreadModeAtBatchOneMatchesTheModuleRunInALoop) {
  SKIP_WITHOUT_SILERO();
  const Scored got = through_corepool("thread", 1, 1);
  EXPECT_EQ(got.largest_batch, 1u);
  expect_matches_reference(got);
}

TEST(SileroTest, ThreadModeBatchedAcrossStreamsMatchesTheModuleRunInALoop) {
  SKIP_WITHOUT_SILERO();
  const Scored got = through_corepool("thread", 1, 8);
  EXPECT_GT(got.largest_batch, 1u);  // chunks of different streams shared calls
  expect_matches_reference(got);
}

TEST(SileroTest, TheMethodAsLoadedBatchedAcrossStreamsMatchesTheModuleRunInALoop) {
  SKIP_WITHOUT_SILERO();
  const Scored got = through_corepool("thread", 1, 8, 0, "none");
  EXPECT_GT(got.largest_batch, 1u);
  expect_matches_reference(got);
}

// engine.optimize freezes the method alone (the top level's freeze would drop
// it): the engine then calls the frozen module itself. bf16 leaves it as loaded.
TEST(SileroTest, OptimizeFreezesTheMethodAloneAndBf16LeavesItAsLoaded) {
  SKIP_WITHOUT_SILERO();
  auto model = load_model(kDir);
  const OptimizeOutcome o = optimize_model(*model, "onednn", /*shared=*/false);
  EXPECT_EQ(o.fallback, "");
  EXPECT_EQ(o.applied, "frozen");
  EXPECT_LE(o.max_difference, 1e-5);
  EXPECT_TRUE(torch_of(*model).method_is_module);
  EXPECT_FALSE(module_of(*model).hasattr("_model")) << "the module is the inner network itself";
  auto as_loaded = load_model(kDir);
  EXPECT_EQ(optimize_model(*as_loaded, "bf16", /*shared=*/false).applied, "none");
  EXPECT_FALSE(torch_of(*as_loaded).method_is_module);
}

TEST(SileroTest, ProcessModeAtBatchOneMatchesTheModuleRunInALoop) {
  SKIP_WITHOUT_SILERO();
  const Scored got = through_corepool("process", 1, 1);
  EXPECT_EQ(got.largest_batch, 1u);
  expect_matches_reference(got);
}

TEST(SileroTest, ProcessModeBatchedAcrossStreamsMatchesTheModuleRunInALoop) {
  SKIP_WITHOUT_SILERO();
  const Scored got = through_corepool("process", 1, 8);
  EXPECT_GT(got.largest_batch, 1u);
  expect_matches_reference(got);
}

// The state travels in the task: the killed worker's chunks go to another
// worker with the state they were sent with, and every score is still exact.
TEST(SileroTest, AKilledWorkersChunksAreRedispatchedWithTheirState) {
  SKIP_WITHOUT_SILERO();
  const Scored got = through_corepool("process", 2, 4, /*kill_after=*/60);
  EXPECT_TRUE(got.killed);
  std::printf("chunks re-dispatched after the kill: %llu\n", static_cast<unsigned long long>(got.redispatched));
  expect_matches_reference(got);
}

// Process mode's one read-only copy of the weights works for it as for every
// model: every parameter and buffer (the 8 kHz network's too) is rebound into
// the sealed segment, and the inner method still runs on the views.
TEST(SileroTest, WeightsAreSharedReadOnlyLikeEveryModels) {
  SKIP_WITHOUT_SILERO();
  auto model = load_model(kDir);
  const SharedWeights weights = share_weights(*model);
  EXPECT_EQ(verify_shared_weights(weights), "");
  EXPECT_EQ(weights.weight_bytes, model->weight_bytes);
  const char* base = static_cast<const char*>(weights.segment.data());
  size_t inside = 0, tensors = 0;
  for (const auto& t : module_of(*model).parameters()) {
    const char* p = static_cast<const char*>(t.data_ptr());
    inside += p >= base && p < base + weights.segment.size();
    ++tensors;
  }
  EXPECT_GT(tensors, 0u);
  EXPECT_EQ(inside, tensors);
  c10::InferenceMode guard;
  const auto out = module_of(*model).attr("_model").toModule().forward({torch::zeros({1, 576}), torch::zeros({2, 1, 128})});
  EXPECT_TRUE(out.isTuple());
}

}  // namespace
}  // namespace corepool
