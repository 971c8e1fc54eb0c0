// Process mode's shared weights: the weight table's layout and checks, a module
// rebound to one read-only segment scoring bitwise like an unshared load, the
// memory that saves, and forked children that read the one mapping (and die
// alone if they write it). Fork scenarios run in a fresh copy of this binary
// (libuv's spawn_helper), so no child inherits an earlier test's OpenMP pool.
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include "shm/weight_table.h"
#include "tests/engine/segments.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "worker/engine.h"
#include "worker/shared_weights.h"

extern char** environ;

namespace corepool {
namespace {

using ::testing::HasSubstr;
using testing::noise_segments;

constexpr char kModelEnv[] = "COREPOOL_SHARED_WEIGHTS_MODEL";
constexpr char kScratchEnv[] = "COREPOOL_SHARED_WEIGHTS_SCRATCH";
constexpr int kChildDeadlineMs = 60'000;
constexpr int kHelperDeadlineMs = 120'000;
constexpr int kSegments = 3;
constexpr unsigned kSeed = 11;

// ---------------------------------------------------------------- helpers

// All scores of the fixed test segments, flattened: what "same result" compares.
std::vector<float> scores_of(const std::shared_ptr<const LoadedModel>& model) {
  const auto segs = noise_segments(model->config, kSegments, kSeed);
  std::vector<const float*> ptrs;
  for (const auto& s : segs) ptrs.push_back(s.data());
  std::vector<float> flat;
  for (const auto& row : Engine(model).infer(ptrs)) flat.insert(flat.end(), row.begin(), row.end());
  return flat;
}

void write_scores(const std::string& path, const std::vector<float>& v) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
}

std::vector<float> read_scores(const std::string& path) {
  const std::string bytes = testing::read_file(path);
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

void generate_model(const std::string& out, std::vector<std::string> extra_args) {
  std::vector<std::string> argv = {COREPOOL_GEN_MODEL_BIN, "--out", out, "--width", "8"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  std::filesystem::create_directories(out);
  const testing::ProcessResult r = testing::run_process(argv, out);
  if (r.exit_code != 0) throw std::runtime_error("corepool-gen-model failed: " + r.err);
}

bool inside(const shm::Segment& segment, const void* p) {
  const char* begin = static_cast<const char*>(segment.data());
  return p >= begin && p < begin + segment.size();
}

bool every_parameter_inside(const shm::Segment& segment, const torch::jit::Module& module) {
  for (const auto& p : module.parameters()) {
    if (!inside(segment, p.data_ptr())) return false;
  }
  return true;
}

std::shared_ptr<LoadedModel> model_of(torch::jit::Module module) {
  auto model = std::make_shared<LoadedModel>();
  model->dir = "in-memory";
  model->torch = std::make_shared<TorchModule>();
  model->torch->module = std::move(module);
  return model;
}

std::map<std::string, at::Tensor> named_tensors(const torch::jit::Module& m) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : m.named_parameters(true)) out.emplace(p.name, p.value);
  for (const auto& b : m.named_buffers(true)) out.emplace(b.name, b.value);
  return out;
}

// What a generated model lacks: a submodule, buffers, a transposed parameter,
// a strided slice with a storage offset, empty and 0-dim tensors, many dtypes.
torch::jit::Module varied_module(int64_t rows = 4) {
  torch::manual_seed(3);
  torch::jit::Module sub("Sub");
  sub.register_parameter("bias", torch::randn({5}, torch::kFloat64), false);
  sub.register_buffer("steps", torch::tensor({7, 8, 9}, torch::kInt64));
  torch::jit::Module m("Varied");
  m.register_parameter("w_t", torch::randn({3, rows}).t(), false);
  m.register_parameter("half", torch::randn({2, 3}).to(torch::kHalf), false);
  m.register_buffer("mask", torch::tensor({true, false, true}));
  m.register_buffer("bytes", torch::arange(10, torch::kUInt8));
  m.register_buffer("bf16", torch::randn({4}).to(torch::kBFloat16));
  m.register_buffer("cplx", torch::randn({2}, torch::kComplexFloat));
  m.register_buffer("empty", torch::zeros({0, 4}));
  m.register_buffer("scalar", torch::tensor(2.5));
  m.register_buffer("every_other", torch::arange(12, torch::kInt32).slice(0, 1, 12, 2));
  m.register_module("sub", sub);
  return m;
}

torch::jit::Module one_tensor_module(const std::string& name, const at::Tensor& t) {
  torch::jit::Module m("One");
  m.register_parameter(name, t, false);
  return m;
}

// ------------------------------------------------------- child processes

using testing::ExitStatus;

// A child still running at the deadline is killed and reaped, and counts as timed out.
ExitStatus wait_child(pid_t pid, int deadline_ms = kChildDeadlineMs) {
  return testing::wait_for_exit(pid, testing::after(std::chrono::milliseconds(deadline_ms)));
}

// Runs body in a forked child whose exit status is body's result.
pid_t fork_child(const std::function<int()>& body) {
  testing::ChildProcess child = testing::ChildProcess::fork(body);
  return child.release();
}

// A child about to crash on purpose: no core file to write.
void no_core_dump() {
  ::prctl(PR_SET_DUMPABLE, 0);
  const rlimit none{0, 0};
  ::setrlimit(RLIMIT_CORE, &none);
}

struct HelperRun {
  ExitStatus exit;
  std::string out;  // stdout and stderr
};

// Runs one hidden helper test of this binary in a fresh process (libuv's
// spawn_helper): a process that has run no LibTorch op yet, as the supervisor
// is when it forks. Model and scratch dir reach it through the environment.
HelperRun run_helper(const std::string& test, const std::string& model_dir, const std::string& scratch) {
  testing::SpawnOptions options;
  options.env = {std::string(kModelEnv) + "=" + model_dir, std::string(kScratchEnv) + "=" + scratch};
  options.drop_env = {"GTEST_"};  // our flags, not the caller's
  const testing::Spawned child =
      testing::spawn_process_with(testing::self_test_argv("SharedWeightsHelper." + test), scratch, options);
  HelperRun run;
  run.exit = testing::wait_for_exit(child.pid, testing::after(std::chrono::milliseconds(kHelperDeadlineMs)));
  run.out = testing::read_file(child.out_path) + testing::read_file(child.err_path);
  return run;
}

// The names this process left in /dev/shm (Segment removes them at once).
std::vector<std::string> shm_names_of_this_process() {
  const std::string prefix = "corepool." + std::to_string(::getpid()) + ".";
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().string());
  }
  return out;
}

// ------------------------------------------------ the table, without torch

TEST(SharedWeightsTable, Xxh64GivesThePublishedValues) {
  // Reference values from libxxhash 0.8.1's XXH64(data, len, 0).
  EXPECT_EQ(shm::xxh64("", 0), 0xef46db3751d8e999ULL);
  EXPECT_EQ(shm::xxh64("a", 1), 0xd24ec4f1a98c6e5bULL);
  EXPECT_EQ(shm::xxh64("abc", 3), 0x44bc2cf5ad770999ULL);
  EXPECT_EQ(shm::xxh64("corepool weights", 16), 0xc83b94d525ed8bcaULL);
  std::string long_input;
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i < 256; ++i) long_input.push_back(static_cast<char>(i));
  }
  long_input += "xyz";
  EXPECT_EQ(shm::xxh64(long_input.data(), long_input.size()), 0xe146cb31b65bc21aULL);
}

TEST(SharedWeightsTable, LayoutPutsEveryTensorOnItsOwnCacheLineAfterTheTable) {
  const std::vector<shm::WeightSpan> spans = {{"a", 10}, {"b", 0}, {"c", 64}, {"d", 1}};
  const shm::WeightLayout layout = shm::plan_weight_layout(spans);
  EXPECT_EQ(layout.table_offset, sizeof(shm::WeightHeader));
  EXPECT_GE(layout.data_offset, layout.table_offset + spans.size() * sizeof(shm::WeightEntry));
  EXPECT_EQ(layout.data_offset % 64, 0u);
  ASSERT_EQ(layout.offsets.size(), spans.size());
  uint64_t end = layout.data_offset;
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(layout.offsets[i] % 64, 0u) << spans[i].name;
    EXPECT_GE(layout.offsets[i], end) << spans[i].name << " overlaps the tensor before it";
    end = layout.offsets[i] + spans[i].bytes;
  }
  EXPECT_GE(layout.total_bytes, end);
  EXPECT_EQ(layout.total_bytes % 64, 0u);
}

TEST(SharedWeightsTable, NameLongerThanTheTableHoldsIsAnErrorNamingIt) {
  const std::string fits(shm::kMaxWeightNameLength, 'n');
  EXPECT_NO_THROW(shm::plan_weight_layout({{fits, 4}}));
  const std::string too_long = fits + "X";
  try {
    shm::plan_weight_layout({{"ok", 4}, {too_long, 4}});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'" + too_long + "'"));
    EXPECT_THAT(e.what(), HasSubstr(std::to_string(shm::kMaxWeightNameLength)));
  }
}

TEST(SharedWeightsTable, StridedSpanRunsFromTheFirstElementToPastTheLast) {
  const int64_t shape[] = {3, 2}, contiguous[] = {2, 1}, transposed[] = {1, 3};
  EXPECT_EQ(shm::strided_span_bytes(2, shape, contiguous, 4), 24u);
  EXPECT_EQ(shm::strided_span_bytes(2, shape, transposed, 4), 24u);
  const int64_t six[] = {6}, every_other[] = {2}, expanded[] = {0};
  EXPECT_EQ(shm::strided_span_bytes(1, six, every_other, 4), 44u);
  EXPECT_EQ(shm::strided_span_bytes(1, six, expanded, 8), 8u);
  const int64_t empty[] = {0, 5};
  EXPECT_EQ(shm::strided_span_bytes(2, empty, contiguous, 4), 0u);
  EXPECT_EQ(shm::strided_span_bytes(0, nullptr, nullptr, 2), 2u);  // a 0-dim scalar
  const int64_t negative[] = {-1};
  EXPECT_EQ(shm::strided_span_bytes(1, six, negative, 4), UINT64_MAX);
}

// A one-entry weight segment built in ordinary memory.
std::vector<uint64_t> tiny_segment() {
  const shm::WeightLayout layout = shm::plan_weight_layout({{"w", 12}});
  std::vector<uint64_t> words(layout.total_bytes / 8, 0);
  const shm::WeightHeader header = shm::weight_header_for(layout);
  std::memcpy(words.data(), &header, sizeof header);
  shm::WeightEntry e{};
  std::strcpy(e.name, "w");
  e.element_bytes = 4;
  e.kind = static_cast<uint32_t>(shm::WeightKind::kParameter);
  e.ndim = 1;
  e.shape[0] = 3;
  e.strides[0] = 1;
  e.span_bytes = 12;
  e.offset = layout.offsets[0];
  std::memcpy(shm::weight_entries(words.data()), &e, sizeof e);
  shm::weight_header(words.data()).checksum = shm::weight_checksum(words.data());
  return words;
}

TEST(SharedWeightsTable, SegmentThatIsNotOursOrDoesNotFitIsRejected) {
  std::vector<uint64_t> words = tiny_segment();
  const size_t bytes = words.size() * 8;
  EXPECT_EQ(shm::verify_weight_segment(words.data(), bytes), "");
  EXPECT_THAT(shm::validate_header(words.data(), bytes - 64), HasSubstr("does not fit"));
  EXPECT_THAT(shm::validate_header(words.data(), 16), HasSubstr("smaller than its header"));
  shm::weight_header(words.data()).version = 99;
  EXPECT_THAT(shm::validate_header(words.data(), bytes), HasSubstr("version 99"));
  std::vector<uint64_t> zeros(words.size(), 0);
  EXPECT_THAT(shm::validate_header(zeros.data(), bytes), HasSubstr("bad magic"));
}

TEST(SharedWeightsTable, EntryOutsideTheDataAreaOrInconsistentIsRejected) {
  std::vector<uint64_t> words = tiny_segment();
  shm::WeightEntry& e = shm::weight_entries(words.data())[0];
  e.offset += 64;
  EXPECT_THAT(shm::validate_entry(words.data(), 0), HasSubstr("outside the data area"));
  e.offset -= 64;
  e.shape[0] = 4;
  EXPECT_THAT(shm::validate_entry(words.data(), 0), HasSubstr("'w'"));
  EXPECT_THAT(shm::validate_entry(words.data(), 0), HasSubstr("span of 12 bytes"));
  e.shape[0] = 3;
  std::memset(e.name, 'x', sizeof e.name);
  EXPECT_THAT(shm::validate_entry(words.data(), 0), HasSubstr("not NUL-terminated"));
}

TEST(SharedWeightsTable, ChecksumCoversTheTableAndTheData) {
  std::vector<uint64_t> words = tiny_segment();
  const size_t bytes = words.size() * 8;
  char* base = reinterpret_cast<char*>(words.data());
  base[shm::weight_entries(words.data())[0].offset + 11] ^= 1;
  EXPECT_THAT(shm::verify_weight_segment(base, bytes), HasSubstr("checksum"));
  base[shm::weight_entries(words.data())[0].offset + 11] ^= 1;
  shm::weight_entries(words.data())[0].dtype ^= 1;
  EXPECT_THAT(shm::verify_weight_segment(base, bytes), HasSubstr("checksum"));
}

// -------------------------------------------------- sharing a real module

class SharedWeightsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir;
    generate_model(model_dir(), {});
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  // Leak check: a Segment's name lives only while Segment::create() runs.
  void TearDown() override { EXPECT_EQ(shm_names_of_this_process(), std::vector<std::string>{}); }

  static std::string model_dir() { return *dir_ / "model"; }

  static testing::TempDir* dir_;
};

testing::TempDir* SharedWeightsTest::dir_ = nullptr;

TEST_F(SharedWeightsTest, SharedModuleScoresBitwiseLikeAnUnsharedLoad) {
  const auto unshared = load_model(model_dir());
  const auto model = load_model(model_dir());
  const SharedWeights weights = share_weights(*model);
  ASSERT_TRUE(every_parameter_inside(weights.segment, module_of(*model)));
  EXPECT_EQ(scores_of(model), scores_of(unshared));
}

TEST_F(SharedWeightsTest, EveryParameterIsAnAlignedViewIntoTheSegment) {
  const auto model = load_model(model_dir());
  const SharedWeights weights = share_weights(*model);
  size_t count = 0;
  for (const auto& p : module_of(*model).named_parameters(true)) {
    const auto address = reinterpret_cast<uintptr_t>(p.value.data_ptr());
    EXPECT_TRUE(inside(weights.segment, p.value.data_ptr())) << p.name;
    EXPECT_EQ(address % 64, 0u) << p.name;
    ++count;
  }
  EXPECT_EQ(weights.entries, count);
  EXPECT_EQ(weights.weight_bytes, model->weight_bytes);
  EXPECT_EQ(verify_shared_weights(weights), "");
}

TEST_F(SharedWeightsTest, EveryDtypeStrideAndSubmoduleTensorKeepsItsValues) {
  auto model = model_of(varied_module());
  std::map<std::string, at::Tensor> before;
  std::map<std::string, std::vector<int64_t>> strides_before;
  for (const auto& [name, t] : named_tensors(module_of(*model))) {
    before.emplace(name, t.clone());
    strides_before.emplace(name, t.strides().vec());
  }
  const SharedWeights weights = share_weights(*model);
  const auto after = named_tensors(module_of(*model));
  ASSERT_EQ(after.size(), 11u);
  EXPECT_EQ(weights.entries, 11u);
  for (const auto& [name, t] : after) {
    if (t.numel() > 0) {
      EXPECT_TRUE(inside(weights.segment, t.data_ptr())) << name;
    }
    EXPECT_EQ(t.scalar_type(), before.at(name).scalar_type()) << name;
    EXPECT_EQ(t.sizes(), before.at(name).sizes()) << name;
    EXPECT_EQ(t.strides().vec(), strides_before.at(name)) << name;
    EXPECT_TRUE(torch::equal(t, before.at(name))) << name;
  }
}

TEST_F(SharedWeightsTest, LargeModelIsResidentOnceNotTwice) {
  testing::TempDir dir;
  generate_model(dir / "large", {"--hidden", "200000"});
  const long before_kb = testing::current_rss_kb();
  const auto model = load_model(dir / "large");
  const long loaded_kb = testing::current_rss_kb();
  const SharedWeights weights = share_weights(*model);
  const long shared_kb = testing::current_rss_kb();
  const long weights_kb = static_cast<long>(model->weight_bytes / 1024);
  ASSERT_GT(weights_kb, 40 * 1024) << "the large model should have ~51 MB of weights";
  EXPECT_TRUE(inside(weights.segment, module_of(*model).attr("hidden_w").toTensor().data_ptr()));
  EXPECT_GT(loaded_kb - before_kb, weights_kb * 8 / 10) << "loading should make the weights resident";
  // The segment's pages count once (they were just written); the heap copy is gone.
  EXPECT_GT(shared_kb - before_kb, weights_kb * 8 / 10);
  EXPECT_LT(shared_kb - before_kb, weights_kb * 3 / 2)
      << "RSS grew by " << (shared_kb - before_kb) << " kB for " << weights_kb << " kB of weights";
}

TEST_F(SharedWeightsTest, ForkedChildrenScoreFromTheOneMappingLikeAnUnsharedLoad) {
  testing::TempDir scratch;
  const HelperRun run = run_helper("DISABLED_ForkedChildrenScoreFromTheInheritedModule", model_dir(),
                                   scratch.path());
  EXPECT_FALSE(run.exit.timed_out) << run.out;
  EXPECT_EQ(run.exit.code, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("[  PASSED  ] 1 test.")) << run.out;
}

TEST_F(SharedWeightsTest, ChildThatWritesAWeightDiesOfSigsegvAndNobodyElseNotices) {
  testing::TempDir scratch;
  const HelperRun run = run_helper("DISABLED_ChildThatWritesAWeightDiesAlone", model_dir(), scratch.path());
  EXPECT_FALSE(run.exit.timed_out) << run.out;
  EXPECT_EQ(run.exit.code, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("[  PASSED  ] 1 test.")) << run.out;
}

TEST_F(SharedWeightsTest, VerifyDetectsOneCorruptedByteAndARewrittenHeader) {
  const auto model = load_model(model_dir());
  SharedWeights weights = share_weights(*model);
  ASSERT_EQ(verify_shared_weights(weights), "");
  // Writable again for this test only: the byte flips go through the same mapping.
  ASSERT_EQ(weights.segment.protect_read_write(), 0);
  char* base = static_cast<char*>(weights.segment.data());
  const shm::WeightEntry& last = shm::weight_entries(base)[weights.entries - 1];
  base[last.offset + last.span_bytes - 1] ^= 0x40;
  EXPECT_THAT(verify_shared_weights(weights), HasSubstr("checksum"));
  base[last.offset + last.span_bytes - 1] ^= 0x40;
  EXPECT_EQ(verify_shared_weights(weights), "");
  shm::weight_header(base).magic ^= 1;
  EXPECT_THAT(verify_shared_weights(weights), HasSubstr("bad magic"));
  shm::weight_header(base).magic ^= 1;
  // A corruption that also rewrote the header's checksum is caught by the copy
  // SharedWeights keeps.
  base[last.offset] ^= 0x40;
  shm::weight_header(base).checksum = shm::weight_checksum(base);
  EXPECT_THAT(verify_shared_weights(weights), HasSubstr("share_weights() wrote"));
  base[last.offset] ^= 0x40;
  shm::weight_header(base).checksum = weights.checksum;
  EXPECT_EQ(weights.segment.protect_read_only(), 0);
  EXPECT_EQ(verify_shared_weights(weights), "");
}

TEST_F(SharedWeightsTest, ParameterNameLongerThanTheTableHoldsIsAClearErrorAndChangesNothing) {
  const std::string name(shm::kMaxWeightNameLength + 1, 'w');
  auto model = model_of(one_tensor_module(name, torch::ones({3})));
  const void* data = (*module_of(*model).parameters().begin()).data_ptr();
  try {
    share_weights(*model);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("parameter '" + name + "'"));
    EXPECT_THAT(e.what(), HasSubstr("at most " + std::to_string(shm::kMaxWeightNameLength)));
  }
  EXPECT_EQ((*module_of(*model).parameters().begin()).data_ptr(), data);
}

TEST_F(SharedWeightsTest, QuantizedTensorIsRefusedByName) {
  torch::jit::Module m("Q");
  m.register_buffer("q", torch::quantize_per_tensor(torch::ones({4}), 0.1, 0, torch::kQInt8));
  try {
    share_weights(*model_of(m));
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("buffer 'q': is quantized"));
  }
}

TEST_F(SharedWeightsTest, FreshLoadBindsToTheTableAndScoresLikeAnUnsharedLoad) {
  const auto unshared = load_model(model_dir());
  const SharedWeights weights = share_weights(*load_model(model_dir()));
  const auto fresh = load_model(model_dir());
  bind_to_table(*fresh, weights.segment);
  for (const auto& p : module_of(*fresh).named_parameters(true)) {
    EXPECT_TRUE(inside(weights.segment, p.value.data_ptr())) << p.name;
  }
  EXPECT_EQ(scores_of(fresh), scores_of(unshared));
}

// bind_to_table's error for `module` against a segment shared from `shared`,
// checking that the module was left as it was.
std::string bind_error(torch::jit::Module shared, torch::jit::Module module) {
  const SharedWeights weights = share_weights(*model_of(std::move(shared)));
  const auto model = model_of(std::move(module));
  const void* data = (*module_of(*model).parameters().begin()).data_ptr();
  std::string error = "no error";
  try {
    bind_to_table(*model, weights.segment);
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  EXPECT_EQ((*module_of(*model).parameters().begin()).data_ptr(), data) << "the module changed";
  return error;
}

TEST_F(SharedWeightsTest, BindingAModuleThatDiffersNamesTheMismatchAndChangesNothing) {
  EXPECT_THAT(bind_error(varied_module(4), varied_module(5)),
              HasSubstr("parameter 'w_t': shape [5, 3], the table has [4, 3]"));
  EXPECT_THAT(bind_error(one_tensor_module("w", torch::zeros({3})),
                         one_tensor_module("w", torch::zeros({3}, torch::kFloat64))),
              HasSubstr("parameter 'w': dtype Double, the table has Float"));
  EXPECT_THAT(bind_error(one_tensor_module("w", torch::zeros({3})), one_tensor_module("v", torch::zeros({3}))),
              HasSubstr("parameter 'v': not in the weight table"));
  EXPECT_THAT(bind_error(varied_module(), one_tensor_module("w_t", torch::zeros({4, 3}))),
              HasSubstr("module has 1 parameters and buffers, the weight table has 11"));
}

TEST_F(SharedWeightsTest, BindingToASegmentThatHoldsNoWeightsFails) {
  const shm::Segment zeros = shm::Segment::create(4096, "not-weights");
  const auto model = load_model(model_dir());
  try {
    bind_to_table(*model, zeros);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(model_dir()));
    EXPECT_THAT(e.what(), HasSubstr("bad magic"));
  }
}

// ------------------------------------ hidden helpers, run in a fresh process

// The supervisor's side, up to its fork: thread counts first, load, share, no op.
struct ForkReadyModel {
  std::shared_ptr<const LoadedModel> model;
  SharedWeights weights;
};

ForkReadyModel load_and_share(const char* model_dir) {
  at::set_num_threads(1);  // before this process's first op, once
  auto model = load_model(model_dir);
  SharedWeights weights = share_weights(*model);
  return {std::move(model), std::move(weights)};
}

// A child's work: check that the inherited module reads the inherited mapping,
// then score the fixed segments with it and save the scores.
int score_into(const ForkReadyModel& shared, const std::string& path) {
  if (!every_parameter_inside(shared.weights.segment, module_of(*shared.model))) return 4;
  write_scores(path, scores_of(shared.model));
  return 0;
}

TEST(SharedWeightsHelper, DISABLED_ForkedChildrenScoreFromTheInheritedModule) {
  const char* model_dir = std::getenv(kModelEnv);
  const char* scratch = std::getenv(kScratchEnv);
  // Run by hand without its parent's environment, a helper has nothing to check: that is a failure.
  ASSERT_TRUE(model_dir && scratch) << "a helper of SharedWeightsTest; runs only as its child";
  const ForkReadyModel shared = load_and_share(model_dir);
  std::vector<pid_t> children;
  for (int i = 0; i < 2; ++i) {
    const std::string path = std::string(scratch) + "/child" + std::to_string(i) + ".bin";
    children.push_back(fork_child([&] { return score_into(shared, path); }));
    ASSERT_GT(children.back(), 0) << "fork failed";
  }
  for (const pid_t pid : children) {
    const ExitStatus e = wait_child(pid);
    EXPECT_FALSE(e.timed_out);
    EXPECT_EQ(e.signal, 0);
    EXPECT_EQ(e.code, 0);
  }
  // Every child is forked: only now may this process run ops of its own.
  const std::vector<float> expected = scores_of(load_model(model_dir));
  ASSERT_FALSE(expected.empty());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(read_scores(std::string(scratch) + "/child" + std::to_string(i) + ".bin"), expected) << i;
  }
  EXPECT_EQ(verify_shared_weights(shared.weights), "");
}

TEST(SharedWeightsHelper, DISABLED_ChildThatWritesAWeightDiesAlone) {
  const char* model_dir = std::getenv(kModelEnv);
  const char* scratch = std::getenv(kScratchEnv);
  // Run by hand without its parent's environment, a helper has nothing to check: that is a failure.
  ASSERT_TRUE(model_dir && scratch) << "a helper of SharedWeightsTest; runs only as its child";
  const ForkReadyModel shared = load_and_share(model_dir);
  at::Tensor first = *module_of(*shared.model).parameters().begin();
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  // A sibling that is alive while the writers crash, and scores afterwards.
  const std::string reader_path = std::string(scratch) + "/reader.bin";
  const pid_t reader = fork_child([&] {
    ::close(go[1]);  // EOF instead of a hang if the parent dies
    char c = 0;
    if (::read(go[0], &c, 1) != 1) return 3;
    return score_into(shared, reader_path);
  });
  ::close(go[0]);
  const pid_t raw_writer = fork_child([&] {
    no_core_dump();
    *static_cast<volatile float*>(first.data_ptr()) = 1.0f;
    return 0;
  });
  const pid_t op_writer = fork_child([&] {
    no_core_dump();
    first.add_(1);
    return 0;
  });
  EXPECT_EQ(wait_child(raw_writer).signal, SIGSEGV);
  EXPECT_EQ(wait_child(op_writer).signal, SIGSEGV);
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  ::close(go[1]);
  const ExitStatus r = wait_child(reader);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(verify_shared_weights(shared.weights), "");
  const std::vector<float> expected = scores_of(load_model(model_dir));
  EXPECT_EQ(read_scores(reader_path), expected);
  EXPECT_EQ(scores_of(shared.model), expected) << "the parent's own module";
}

}  // namespace
}  // namespace corepool
