// Where `corepool tune` and `corepool bench --quick` measure engine.optimize =
// bf16 (supervisor/bench/bench_types.h): only on a CPU with a bf16 unit, unless
// asked for by name. The CPU is an argument here (core_peak.h's
// native_bf16_isa() names this one's), so every case runs on any machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "supervisor/bench/bench_types.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;

constexpr const char* kNoBf16Unit = "";

TEST(Bf16SweepTest, TuneLeavesBf16OutOnlyWhereTheCpuHasNoBf16UnitAndNothingWasAsked) {
  EXPECT_TRUE(tune_skips_bf16({}, kNoBf16Unit));
  EXPECT_FALSE(tune_skips_bf16({}, "avx512_bf16"));
  EXPECT_FALSE(tune_skips_bf16({}, "amx"));
  // --optimize names what is tried, bf16 included, whatever the CPU.
  EXPECT_FALSE(tune_skips_bf16({"bf16"}, kNoBf16Unit));
  EXPECT_FALSE(tune_skips_bf16({"none", "onednn", "bf16"}, kNoBf16Unit));
}

TEST(Bf16SweepTest, AQuickBenchLeavesBf16OutOnlyWhereTheCpuHasNoBf16UnitAndNothingWasAsked) {
  BenchOptions o;
  o.quick = true;
  EXPECT_TRUE(quick_bench_skips_bf16(o, kNoBf16Unit));
  EXPECT_FALSE(quick_bench_skips_bf16(o, "avx512_bf16"));
  EXPECT_FALSE(quick_bench_skips_bf16(o, "amx"));

  BenchOptions asked = o;
  asked.optimize = "bf16";  // --optimize bf16 (or engine.optimize in the config)
  EXPECT_FALSE(quick_bench_skips_bf16(asked, kNoBf16Unit));
  asked = o;
  asked.modes = {"thread", "bf16"};  // --modes: exactly the kinds named
  EXPECT_FALSE(quick_bench_skips_bf16(asked, kNoBf16Unit));

  BenchOptions full = o;
  full.quick = false;  // the full sweep measures every kind
  EXPECT_FALSE(quick_bench_skips_bf16(full, kNoBf16Unit));
}

TEST(Bf16SweepTest, TheNotesSayWhyAndHowToAskForBf16) {
  const std::string skipped = bf16_skipped_note("--optimize none,onednn,bf16");
  EXPECT_THAT(skipped, HasSubstr("neither AVX512_BF16 nor AMX-BF16"));
  EXPECT_THAT(skipped, HasSubstr("--optimize none,onednn,bf16 measures it anyway"));
  EXPECT_THAT(bf16_emulated_note(), HasSubstr("emulated"));
}

}  // namespace
}  // namespace corepool
