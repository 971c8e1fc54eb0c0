// Tensors in client shared memory (supervisor/triton/client_shm_io.cc): the
// input read from a real shm object equals what the test wrote there, the
// scores land exactly where asked, and every wrong size, region or value is
// refused before any byte moves.
#include "supervisor/triton/client_shm_io.h"

#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/client_shm_object.h"
#include "tests/support/fd_count.h"

namespace corepool::triton {
namespace {

using ::testing::HasSubstr;
using testing::ClientShmObject;

constexpr int64_t kMaxBatch = 8;

ModelConfig waveform_model() {  // 4 floats per item, 3 labels
  ModelConfig m;
  m.name = "vad";
  m.input = InputKind::kWaveform;
  m.sample_rate = 1000;
  m.segment_seconds = 0.004;
  m.labels = {"a", "b", "c"};
  m.thresholds = {0.5f, 0.5f, 0.5f};
  return m;
}

oip::TensorHeader header(std::vector<int64_t> shape, std::string datatype = "FP32", std::string name = "input") {
  return {std::move(name), std::move(datatype), std::move(shape)};
}

std::vector<unsigned char> bytes_of(const std::vector<float>& values) {
  std::vector<unsigned char> out(values.size() * sizeof(float));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

class ClientShmIoTest : public ::testing::Test {
 protected:
  // The region "r" covers object bytes [16, 16 + 64) of a 128-byte object.
  void SetUp() override {
    fds_at_start_ = testing::open_fd_count();
    object_ = std::make_unique<ClientShmObject>(128);
    auto made = ClientShmRegistry::create({true, ""});
    ASSERT_TRUE(made.status.ok());
    registry_ = std::move(made.value);
    ASSERT_TRUE(registry_->register_region("r", object_->key(), 16, 64).ok());
  }
  void TearDown() override {
    registry_.reset();
    object_.reset();
    EXPECT_EQ(testing::open_fd_count(), fds_at_start_) << "a region's fd was not closed";
    EXPECT_THAT(testing::shm_residue(), ::testing::IsEmpty());
  }

  Result<oip::InferRequest> read(const oip::TensorHeader& h, ShmRef ref) {
    return read_shm_input(*registry_, h, ref, model_, kMaxBatch, "req-1");
  }

  ModelConfig model_ = waveform_model();
  std::unique_ptr<ClientShmObject> object_;
  std::unique_ptr<ClientShmRegistry> registry_;
  int fds_at_start_ = 0;
};

TEST_F(ClientShmIoTest, TheInputEqualsWhatTheClientWrote) {
  const std::vector<float> values = {-1.5f, 0.f, 2.25f, 1e-3f, 7.f, -8.f, 3.5f, 100.f};
  object_->put(16 + 8, bytes_of(values).data(), 32);  // region offset 8
  auto got = read(header({2, 4}), {"r", 8, 32});
  ASSERT_TRUE(got.status.ok()) << got.status.message;
  EXPECT_EQ(got.value.id, "req-1");
  EXPECT_EQ(got.value.batch, 2);
  ASSERT_EQ(got.value.items.size(), 2u);
  EXPECT_EQ(got.value.items[0], std::vector<float>(values.begin(), values.begin() + 4));
  EXPECT_EQ(got.value.items[1], std::vector<float>(values.begin() + 4, values.end()));
}

TEST_F(ClientShmIoTest, AByteSizeThatDoesNotFitTheShapeIsRefused) {
  for (uint64_t size : {28u, 36u, 0u}) {
    auto got = read(header({2, 4}), {"r", 0, size});
    EXPECT_EQ(got.status.code, Code::kInvalidArgument);
    EXPECT_THAT(got.status.message, HasSubstr("inputs[0].parameters.shared_memory_byte_size: " +
                                              std::to_string(size) + " bytes, the shape [2, 4] needs 32 (FP32)"));
  }
}

TEST_F(ClientShmIoTest, AValueThatIsNotFiniteIsRefused) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> values(8, 1.f);
    values[5] = bad;
    object_->put(16, bytes_of(values).data(), 32);
    auto got = read(header({2, 4}), {"r", 0, 32});
    EXPECT_EQ(got.status.code, Code::kInvalidArgument);
    EXPECT_THAT(got.status.message, HasSubstr("inputs[0]: element 5 is not finite"));
  }
}

TEST_F(ClientShmIoTest, TheHeaderIsCheckedAgainstTheModel) {
  EXPECT_THAT(read(header({1, 4}, "FP32", "x"), {"r", 0, 16}).status.message, HasSubstr("inputs[0].name"));
  EXPECT_THAT(read(header({1, 4}, "FP64"), {"r", 0, 16}).status.message, HasSubstr("inputs[0].datatype"));
  EXPECT_THAT(read(header({1, 5}), {"r", 0, 20}).status.message, HasSubstr("inputs[0].shape: expected [B, 4]"));
  EXPECT_THAT(read(header({9, 4}), {"r", 0, 144}).status.message, HasSubstr("B = 1..8"));
  EXPECT_EQ(read(header({1, 4}, "INT8"), {"r", 0, 16}).status.code, Code::kInvalidArgument);
}

TEST_F(ClientShmIoTest, AnUnregisteredRegionIsNotFound) {
  auto got = read(header({1, 4}), {"other", 0, 16});
  EXPECT_EQ(got.status.code, Code::kNotFound);
  EXPECT_THAT(got.status.message, HasSubstr("inputs[0].parameters.shared_memory_region: no region \"other\""));
}

TEST_F(ClientShmIoTest, ARangePastTheRegionIsRefused) {
  for (uint64_t offset : {uint64_t{49}, uint64_t{64}, std::numeric_limits<uint64_t>::max() - 4}) {
    auto got = read(header({1, 4}), {"r", offset, 16});
    EXPECT_EQ(got.status.code, Code::kInvalidArgument) << offset;
    EXPECT_THAT(got.status.message, HasSubstr("is past its end (64 bytes)"));
  }
  EXPECT_TRUE(read(header({1, 4}), {"r", 48, 16}).status.ok());  // exactly to the end
}

TEST_F(ClientShmIoTest, ATruncatedRegionIsAClearError) {
  ASSERT_EQ(::ftruncate(object_->fd(), 0), 0);
  auto got = read(header({2, 4}), {"r", 0, 32});
  EXPECT_EQ(got.status.code, Code::kInvalidArgument);
  EXPECT_THAT(got.status.message, HasSubstr("inputs[0]: region \"r\" was truncated"));
}

TEST_F(ClientShmIoTest, DisabledIsPermissionDeniedBeforeAnyOtherCheck) {
  registry_ = std::move(ClientShmRegistry::create({false, ""}).value);
  auto got = read(header({1, 5}), {"r", 0, 3});  // wrong in every other way too
  EXPECT_EQ(got.status.code, Code::kPermissionDenied);
  EXPECT_EQ(prepare_shm_output(*registry_, {"r", 0, 3}, 1, model_).status.code, Code::kPermissionDenied);
}

TEST_F(ClientShmIoTest, TheScoresAreWrittenRowMajorExactlyWhereAsked) {
  const std::vector<unsigned char> sentinel(128, 0xab);
  object_->put(0, sentinel.data(), 128);
  auto out = prepare_shm_output(*registry_, {"r", 4, 24}, 2, model_);
  ASSERT_TRUE(out.status.ok()) << out.status.message;
  ASSERT_TRUE(write_shm_output(out.value, {{0.1f, 0.2f, 0.3f}, {0.4f, 0.5f, 0.6f}}).ok());

  std::vector<unsigned char> want = sentinel;  // object bytes 20..44 and nothing else
  const auto scores = bytes_of({0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
  std::memcpy(want.data() + 16 + 4, scores.data(), scores.size());
  EXPECT_EQ(object_->get(0, 128), want);
}

TEST_F(ClientShmIoTest, AnOutputByteSizeThatDoesNotFitTheScoresIsRefused) {
  auto out = prepare_shm_output(*registry_, {"r", 0, 28}, 2, model_);
  EXPECT_EQ(out.status.code, Code::kInvalidArgument);
  EXPECT_THAT(out.status.message,
              HasSubstr("outputs[0].parameters.shared_memory_byte_size: 28 bytes, the scores [2, 3] need 24 (FP32)"));
  EXPECT_EQ(prepare_shm_output(*registry_, {"nope", 0, 24}, 2, model_).status.code, Code::kNotFound);
  EXPECT_THAT(prepare_shm_output(*registry_, {"r", 48, 24}, 2, model_).status.message, HasSubstr("past its end"));
}

TEST_F(ClientShmIoTest, APreparedOutputIsWrittenAfterUnregister) {
  auto out = prepare_shm_output(*registry_, {"r", 0, 12}, 1, model_);
  ASSERT_TRUE(out.status.ok());
  ASSERT_TRUE(registry_->unregister("").ok());  // while the request is queued
  ASSERT_TRUE(write_shm_output(out.value, {{1.f, 2.f, 3.f}}).ok());
  EXPECT_EQ(object_->get(16, 12), bytes_of({1.f, 2.f, 3.f}));
}

TEST_F(ClientShmIoTest, ScoresOfTheWrongShapeAreAnInternalErrorAndWriteNothing) {
  const std::vector<unsigned char> zeros(128, 0);
  object_->put(0, zeros.data(), 128);
  auto out = prepare_shm_output(*registry_, {"r", 0, 24}, 2, model_);
  ASSERT_TRUE(out.status.ok());
  EXPECT_EQ(write_shm_output(out.value, {{1.f, 2.f, 3.f}}).code, Code::kInternal);
  EXPECT_EQ(write_shm_output(out.value, {{1.f, 2.f, 3.f}, {4.f, 5.f}}).code, Code::kInternal);
  EXPECT_EQ(object_->get(0, 128), zeros);
}

TEST_F(ClientShmIoTest, AnOutputRegionTruncatedMeanwhileIsAClearErrorAndNotGrown) {
  auto out = prepare_shm_output(*registry_, {"r", 0, 12}, 1, model_);
  ASSERT_TRUE(out.status.ok());
  ASSERT_EQ(::ftruncate(object_->fd(), 8), 0);
  const Status s = write_shm_output(out.value, {{1.f, 2.f, 3.f}});
  EXPECT_EQ(s.code, Code::kInvalidArgument);
  EXPECT_THAT(s.message, HasSubstr("outputs[0]: region \"r\" was truncated"));
  struct stat st {};
  ASSERT_EQ(::fstat(object_->fd(), &st), 0);
  EXPECT_EQ(st.st_size, 8);
}

}  // namespace
}  // namespace corepool::triton
