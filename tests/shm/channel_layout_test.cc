// Tests for shm/channel.h's ChannelLayout: how many slab slots (and so how
// large a batch) a worker's channel gets for a model and its batch. The slab
// holds two batches of a small item (Silero: a chunk and its state), stays
// within its budget for a large one, and no model gets fewer than the 64
// slots every model had before the ring and the batch were decoupled.
#include "shm/channel.h"

#include <gtest/gtest.h>

namespace corepool::shm {
namespace {

// Silero VAD's task: 64 context + 512 samples + a [2, 1, 128] state; result: 1 score + the state.
constexpr uint32_t kSileroTask = 64 + 512 + 256;
constexpr uint32_t kSileroResult = 1 + 256;

TEST(ChannelLayoutTest, ASmallItemGetsARingOfTwoFullBatches) {
  const ChannelLayout l = ChannelLayout::for_model(kSileroTask, kSileroTask, kSileroResult, 256);
  EXPECT_EQ(l.slab.slot_count, kRingSlots);
  EXPECT_EQ(ChannelLayout::for_model(kSileroTask, kSileroTask, kSileroResult, 100).slab.slot_count, 200u);
  EXPECT_EQ(l.batch_limit(), kMaxBatch);
  EXPECT_GE(l.slab.slot_count, 2 * l.batch_limit()) << "a full batch running and a full one waiting";
  EXPECT_GT(l.batch_limit(), 64u) << "the limit this change lifts";
}

TEST(ChannelLayoutTest, OneSecondOf16kHzHoldsTwoBatchesOf64AndNoMoreThanTheBudget) {
  // The default tagger and CNN10: 16000 floats of PCM, 64 x 101 of log-mel,
  // 4 labels; their model.toml allows 64 a batch.
  EXPECT_EQ(ChannelLayout::for_model(16000, 64 * 101, 4, 64).slab.slot_count, 2 * 64u);
  // Asked for more, it gets as many as fit the budget, and its batch no more.
  const ChannelLayout l = ChannelLayout::for_model(16000, 64 * 101, 4, 256);
  EXPECT_LE(l.slab.total_bytes(), kSlabBudgetBytes);
  EXPECT_GT(l.slab.total_bytes() + l.slab.slot_bytes, kSlabBudgetBytes) << "as many slots as fit";
  EXPECT_EQ(l.batch_limit(), l.slab.slot_count);
  EXPECT_LT(l.batch_limit(), 256u);
}

TEST(ChannelLayoutTest, SmallBatchesKeepTheOld64Slots) {
  EXPECT_EQ(ChannelLayout::for_model(16000, 64 * 101, 4, 8).slab.slot_count, kMinSlabSlots);
  EXPECT_EQ(ChannelLayout::for_model(kSileroTask, kSileroTask, kSileroResult, 32).slab.slot_count, kMinSlabSlots);
  EXPECT_EQ(ChannelLayout::for_model(kSileroTask, kSileroTask, kSileroResult, 1).batch_limit(), kMinSlabSlots);
}

TEST(ChannelLayoutTest, WithoutABatchTheLayoutHasTheModelsMostSlots) {
  EXPECT_EQ(ChannelLayout::for_model(kSileroTask, kSileroTask, kSileroResult).batch_limit(), kMaxBatch);
  EXPECT_EQ(ChannelLayout::for_model(16000, 64, 4).slab.slot_count,
            ChannelLayout::for_model(16000, 64, 4, kMaxBatch).slab.slot_count);
}

TEST(ChannelLayoutTest, ALargeItemKeepsTheOld64SlotsPastTheBudget) {
  const ChannelLayout l = ChannelLayout::for_model(10 * 32000, 10 * 32000, 527, 256);  // 10 s of 32 kHz
  EXPECT_EQ(l.slab.slot_count, kMinSlabSlots);
  EXPECT_EQ(l.batch_limit(), kMinSlabSlots);
}

TEST(ChannelLayoutTest, TheSlabFollowsTheRingsAndEndsTheSegment) {
  const ChannelLayout l = ChannelLayout::for_model(16000, 64, 10);
  EXPECT_GE(l.slab_offset, sizeof(ChannelData));
  EXPECT_EQ(l.slab_offset % kCacheLine, 0u);
  EXPECT_EQ(l.total_bytes, l.slab_offset + l.slab.total_bytes());
  EXPECT_LE(l.slab.slot_count, kRingSlots) << "a push must never find a full ring";
}

}  // namespace
}  // namespace corepool::shm
