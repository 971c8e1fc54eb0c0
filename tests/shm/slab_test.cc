// Tests for shm/slab.h: slot sizes and offsets of a slab layout, and the
// supervisor's slot pool (hand out each slot once, take back on release or
// when a worker dies). The pool fixture ends with a leak check: every slot a
// test acquired must be back.
#include "shm/slab.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

namespace corepool::shm {
namespace {

TEST(SlabLayoutTest, SlotSizesAreRoundedUpTo64Bytes) {
  EXPECT_EQ(make_slab_layout(4, 1).slot_bytes, 64u);
  EXPECT_EQ(make_slab_layout(4, 64).slot_bytes, 64u);
  EXPECT_EQ(make_slab_layout(4, 65).slot_bytes, 128u);
  EXPECT_EQ(make_slab_layout(4, 16000 * 4).slot_bytes, 64000u);
  EXPECT_EQ(make_slab_layout(4, 100).slot_count, 4u);
}

TEST(SlabLayoutTest, SlotOffsetsAreIndexTimesSlotSizeAndCacheLineAligned) {
  const SlabLayout layout = make_slab_layout(8, 1000);
  for (uint32_t slot = 0; slot < layout.slot_count; ++slot) {
    EXPECT_EQ(layout.offset_of(slot), uint64_t{slot} * layout.slot_bytes);
    EXPECT_EQ(layout.offset_of(slot) % kSlotAlignment, 0u);
  }
  EXPECT_EQ(layout.total_bytes(), 8u * 1024u);
}

TEST(SlabLayoutTest, OffsetsOfLargeSlabsDoNotOverflow32Bits) {
  const SlabLayout layout = make_slab_layout(1024, 64u << 20);  // 64 GiB in all
  EXPECT_EQ(layout.offset_of(1023), 1023ull * (64ull << 20));
  EXPECT_EQ(layout.total_bytes(), 1024ull * (64ull << 20));
}

TEST(SlabLayoutTest, EmptyOrOversizedLayoutsAreRejected) {
  EXPECT_THROW(make_slab_layout(0, 64), std::invalid_argument);
  EXPECT_THROW(make_slab_layout(4, 0), std::invalid_argument);
  EXPECT_THROW(make_slab_layout(4, uint64_t{1} << 32), std::invalid_argument);
}

class SlotPoolTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(pool_.in_use(), 0u) << "a test kept a slot"; }

  SlotPool pool_{4};
};

TEST_F(SlotPoolTest, EverySlotIsHandedOutOnceThenNothing) {
  std::set<uint32_t> slots;
  for (int i = 0; i < 4; ++i) {
    const auto slot = pool_.acquire();
    ASSERT_TRUE(slot.has_value());
    EXPECT_LT(*slot, 4u);
    slots.insert(*slot);
    EXPECT_EQ(pool_.in_use(), static_cast<uint32_t>(i + 1));
  }
  EXPECT_EQ(slots.size(), 4u);
  EXPECT_FALSE(pool_.acquire().has_value());
  for (const uint32_t slot : slots) pool_.release(slot);
}

TEST_F(SlotPoolTest, AReleasedSlotIsHandedOutAgainFirst) {
  const auto a = pool_.acquire();
  const auto b = pool_.acquire();
  ASSERT_TRUE(a && b);
  pool_.release(*a);
  EXPECT_EQ(pool_.in_use(), 1u);
  const auto again = pool_.acquire();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *a);
  pool_.release(*again);
  pool_.release(*b);
}

TEST_F(SlotPoolTest, ResetTakesBackEverySlotOfADeadWorker) {
  while (pool_.acquire()) {
  }
  EXPECT_EQ(pool_.in_use(), 4u);
  pool_.reset();
  EXPECT_EQ(pool_.in_use(), 0u);
  std::set<uint32_t> slots;
  while (const auto slot = pool_.acquire()) slots.insert(*slot);
  EXPECT_EQ(slots, (std::set<uint32_t>{0, 1, 2, 3}));
  pool_.reset();
}

TEST_F(SlotPoolTest, ReleasingASlotThatIsNotInUseThrows) {
  EXPECT_THROW(pool_.release(0), std::logic_error);
  EXPECT_THROW(pool_.release(4), std::logic_error);
  const auto slot = pool_.acquire();
  ASSERT_TRUE(slot.has_value());
  pool_.release(*slot);
  EXPECT_THROW(pool_.release(*slot), std::logic_error);
  EXPECT_EQ(pool_.capacity(), 4u);
}

}  // namespace
}  // namespace corepool::shm
