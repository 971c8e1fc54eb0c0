// Tests for shm/descriptor_check.h: every field of a descriptor popped from a
// ring is checked against the channel's layout before it becomes an address.
// The slab is heap-allocated at its exact size, so under ASan (build-asan) a
// read past it would fail these tests too.
#include "shm/descriptor_check.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

namespace corepool::shm {
namespace {

// 16000 PCM floats per segment, 64 floats of model input, 10 labels.
class DescriptorCheckTest : public ::testing::Test {
 protected:
  ChannelLayout layout_ = ChannelLayout::for_model(16000, 64, 10);
  std::unique_ptr<char[]> slab_ = std::make_unique<char[]>(layout_.slab.total_bytes());
  const uint32_t last_ = layout_.slab.slot_count - 1;  // the slab's last slot
  const uint32_t past_ = layout_.slab.slot_count;      // the first index past it
  const std::string past_problem_ =
      "slab slot " + std::to_string(past_) + " out of range (" + std::to_string(past_) + " slots)";

  char* result_area(uint32_t slot) { return slab_.get() + layout_.slab.offset_of(slot) + layout_.result_offset; }
};

TEST_F(DescriptorCheckTest, WellFormedRequestPasses) {
  EXPECT_EQ(request_problem({7, last_, 16000, kRunAlone | kModelInput, 0}, layout_), "");
}

TEST_F(DescriptorCheckTest, RequestSlotOutOfRangeIsNamed) {
  EXPECT_EQ(request_problem({7, past_, 16000, 0, 0}, layout_), past_problem_);
  EXPECT_NE(request_problem({7, 0xffffffffu, 1, 0, 0}, layout_), "");
}

TEST_F(DescriptorCheckTest, RequestLongerThanTheInputAreaIsRefused) {
  const std::string p = request_problem({7, 0, 16017, 0, 0}, layout_);
  EXPECT_NE(p.find("16017 floats do not fit"), std::string::npos) << p;
  EXPECT_NE(request_problem({7, 0, 0xffffffffu, 0, 0}, layout_), "");
}

TEST_F(DescriptorCheckTest, UnknownRequestFlagsAreRefused) {
  EXPECT_EQ(request_problem({7, 0, 1, 16, 0}, layout_), "unknown request flags 16");
  EXPECT_EQ(request_problem({7, 0, 1, kSplitFront, 0}, layout_), "");
  EXPECT_EQ(request_problem({7, 0, 1, kSplitSequence | kRunAlone, 0}, layout_), "");
}

TEST_F(DescriptorCheckTest, SuccessfulCompletionYieldsItsScores) {
  const float scores[10] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 1.0f};
  std::memcpy(result_area(5), scores, sizeof(scores));
  DecodedCompletion d = decode_completion({9, 5, 0}, slab_.get(), layout_, 10);
  EXPECT_EQ(d.problem, "");
  ASSERT_EQ(d.scores.size(), 10u);
  EXPECT_FLOAT_EQ(d.scores[9], 1.0f);
}

// A split's results vary in size: the completion says how many floats.
TEST_F(DescriptorCheckTest, ACompletionThatCountsItsFloatsYieldsThatMany) {
  const float scores[10] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 1.0f};
  std::memcpy(result_area(5), scores, sizeof(scores));
  DecodedCompletion d = decode_completion({9, 5, 0, 4}, slab_.get(), layout_, 10);
  EXPECT_EQ(d.problem, "");
  ASSERT_EQ(d.scores.size(), 4u);
  EXPECT_FLOAT_EQ(d.scores[3], 0.4f);
  d = decode_completion({9, 5, 0, 11}, slab_.get(), layout_, 10);
  EXPECT_EQ(d.problem, "11 result floats are more than the layout's 10");
  EXPECT_TRUE(d.scores.empty());
}

TEST_F(DescriptorCheckTest, FailedCompletionYieldsTheWorkersText) {
  std::strcpy(result_area(last_), "inference failed: boom");
  DecodedCompletion d = decode_completion({9, last_, 1}, slab_.get(), layout_, 10);
  EXPECT_EQ(d.problem, "");
  EXPECT_EQ(d.error, "inference failed: boom");
}

TEST_F(DescriptorCheckTest, UnterminatedErrorTextStopsAtTheAreasEnd) {
  std::memset(result_area(last_), 'x', kErrorTextBytes);  // the last slot: no terminator before the slab ends
  DecodedCompletion d = decode_completion({9, last_, 1}, slab_.get(), layout_, 10);
  EXPECT_EQ(d.error, std::string(kErrorTextBytes, 'x'));
}

TEST_F(DescriptorCheckTest, CorruptCompletionsAreNamedAndReadNothing) {
  EXPECT_EQ(decode_completion({9, past_, 0}, slab_.get(), layout_, 10).problem, past_problem_);
  EXPECT_EQ(decode_completion({9, 0, -1}, slab_.get(), layout_, 10).problem, "unknown completion status -1");
  DecodedCompletion d = decode_completion({9, 0, 0}, slab_.get(), layout_, 1u << 30);
  EXPECT_NE(d.problem.find("scores do not fit"), std::string::npos) << d.problem;
  EXPECT_TRUE(d.scores.empty());
}

}  // namespace
}  // namespace corepool::shm
