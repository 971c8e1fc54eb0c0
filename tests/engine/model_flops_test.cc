// The roofline's work figure (supervisor/bench/model_flops.cc): LibTorch's
// profiler on CNN10 must count what CNN10's layers cost by hand: eight 3x3
// convolutions (2 x in x out x 9 per output pixel) in four blocks that halve
// the 101 x 64 log-mel each time, then a 512 -> 4 linear layer, as
// models/gen_model.cc builds it.
#include <cmath>

#include <gtest/gtest.h>

#include "supervisor/bench/model_flops.h"
#include "worker/model/model.h"

namespace corepool {
namespace {

double cnn10_flop_by_hand() {
  struct Conv {
    double in, out, h, w;
  };
  const Conv convs[] = {{1, 64, 101, 64},   {64, 64, 101, 64},  {64, 128, 50, 32},  {128, 128, 50, 32},
                        {128, 256, 25, 16}, {256, 256, 25, 16}, {256, 512, 12, 8},  {512, 512, 12, 8}};
  double flop = 0;
  for (const Conv& c : convs) flop += 2 * c.in * c.out * 9 * c.h * c.w;
  return flop + 2 * 512 * 4;  // the linear layer
}

TEST(ModelFlopsTest, Cnn10CostsWhatItsLayersCostByHand) {
  const auto model = load_model(COREPOOL_CNN10_MODEL);
  const double counted = count_flop_per_segment(*model);
  const double by_hand = cnn10_flop_by_hand();
  EXPECT_NEAR(counted, by_hand, by_hand * 1e-5) << "counted " << counted << ", by hand " << by_hand;
}

}  // namespace
}  // namespace corepool
