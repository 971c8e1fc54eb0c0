// Unit tests for worker/host/cpus.cc: cpu.max parsing, the cgroup quota walk over a fake
// cgroup root (a temp dir laid out like /sys/fs/cgroup), usable_cpus() against the
// real affinity mask, and pinning. Pinning runs on a scratch thread so the test
// process keeps its own affinity.
#include "worker/host/cpus.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

namespace corepool {
namespace {

namespace fs = std::filesystem;

// The cpus in this process's affinity mask, read independently of cpus.cc.
std::vector<int> affinity_mask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

TEST(CpuMaxTest, QuotaAndPeriodGiveCpus) {
  EXPECT_DOUBLE_EQ(parse_cpu_max("150000 100000\n"), 1.5);
  EXPECT_DOUBLE_EQ(parse_cpu_max("200000 100000"), 2.0);
  EXPECT_DOUBLE_EQ(parse_cpu_max("50000 100000"), 0.5);
}

TEST(CpuMaxTest, MaxMeansNoQuota) {
  EXPECT_EQ(parse_cpu_max("max 100000\n"), 0.0);
  EXPECT_EQ(parse_cpu_max("max"), 0.0);
}

TEST(CpuMaxTest, GarbageIsRejected) {
  for (const char* text : {"", "\n", "abc 100000", "150000", "150000 0", "-5 100000",
                           "150000 -100000", "1.5 100000", "150000 100000 7", "max abc",
                           "max 100000 1", "0 100000"}) {
    EXPECT_THROW(parse_cpu_max(text), std::invalid_argument) << '"' << text << '"';
  }
}

// Owns a temp dir laid out like /sys/fs/cgroup.
class CpuBudgetTest : public ::testing::Test {
 protected:
  // Writes `text` to root/relative, creating directories on the way.
  void put(const std::string& relative, const std::string& text) {
    const fs::path file = root_ / fs::path(relative).relative_path();
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }

  double quota(const std::string& proc_self_cgroup) {
    return cgroup_quota_cpus(root_.string(), proc_self_cgroup);
  }

  testing::TempDir temp_{"corepool-cgroup"};
  const fs::path root_ = temp_.path();
};

TEST_F(CpuBudgetTest, V2QuotaIsReadFromTheOwnCgroup) {
  put("/a/b/cpu.max", "150000 100000\n");
  EXPECT_DOUBLE_EQ(quota("0::/a/b\n"), 1.5);
}

TEST_F(CpuBudgetTest, V2TightestQuotaOnTheWayToTheRootWins) {
  put("/cpu.max", "max 100000\n");
  put("/a/cpu.max", "100000 100000\n");
  put("/a/b/cpu.max", "300000 100000\n");
  EXPECT_DOUBLE_EQ(quota("0::/a/b\n"), 1.0);
  put("/a/b/cpu.max", "50000 100000\n");
  EXPECT_DOUBLE_EQ(quota("0::/a/b\n"), 0.5);
}

TEST_F(CpuBudgetTest, V2MaxEverywhereMeansNoQuota) {
  put("/cpu.max", "max 100000\n");
  put("/a/cpu.max", "max 100000\n");
  EXPECT_EQ(quota("0::/a\n"), 0.0);
}

TEST_F(CpuBudgetTest, V2PathMissingUnderTheRootFallsBackToItsParents) {
  // A container that sees the host's cgroup path but has its own cgroup mounted at the root.
  put("/cpu.max", "250000 100000\n");
  EXPECT_DOUBLE_EQ(quota("0::/docker/abc123\n"), 2.5);
}

TEST_F(CpuBudgetTest, V1CfsQuotaIsUsedWithoutCpuMax) {
  put("/cpu,cpuacct/x/cpu.cfs_quota_us", "250000\n");
  put("/cpu,cpuacct/x/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(quota("4:cpu,cpuacct:/x\n2:memory:/x\n"), 2.5);
}

TEST_F(CpuBudgetTest, V1CpuControllerMountedAloneIsFound) {
  put("/cpu/cpu.cfs_quota_us", "50000\n");
  put("/cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(quota("2:cpuacct:/\n1:cpu:/\n0::/\n"), 0.5);
}

TEST_F(CpuBudgetTest, V1QuotaOfMinusOneMeansNoQuota) {
  put("/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  put("/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(quota("3:cpu,cpuacct:/\n"), 0.0);
}

TEST_F(CpuBudgetTest, NoCgroupFilesMeansNoQuota) {
  EXPECT_EQ(quota("0::/a\n"), 0.0);
  EXPECT_EQ(quota(""), 0.0);
}

TEST_F(CpuBudgetTest, AllowedCpusAreTheAffinityMaskInOrder) {
  const CpuBudget budget = usable_cpus(root_.string());
  EXPECT_EQ(budget.allowed, affinity_mask());
  EXPECT_TRUE(std::is_sorted(budget.allowed.begin(), budget.allowed.end()));
}

TEST_F(CpuBudgetTest, WithoutQuotaEveryAllowedCpuIsUsable) {
  const CpuBudget budget = usable_cpus(root_.string());
  EXPECT_EQ(budget.quota_cpus, 0.0);
  EXPECT_EQ(budget.usable, static_cast<int>(affinity_mask().size()));
}

// A cgroup v2 path of our own making, whatever cgroups the host has.
constexpr const char* kFakeCgroup = "0::/corepool-test.slice/serve.service\n";

TEST_F(CpuBudgetTest, FractionalQuotaRoundsUpAndCapsUsableCpus) {
  put("/corepool-test.slice/serve.service/cpu.max", "150000 100000\n");
  const CpuBudget budget = usable_cpus(root_.string(), kFakeCgroup);
  EXPECT_DOUBLE_EQ(budget.quota_cpus, 1.5);
  EXPECT_EQ(budget.usable, std::min(static_cast<int>(affinity_mask().size()), 2));
}

TEST_F(CpuBudgetTest, TinyQuotaStillLeavesOneUsableCpu) {
  put("/corepool-test.slice/serve.service/cpu.max", "1000 100000\n");
  const CpuBudget budget = usable_cpus(root_.string(), kFakeCgroup);
  EXPECT_DOUBLE_EQ(budget.quota_cpus, 0.01);
  EXPECT_EQ(budget.usable, 1);
}

TEST_F(CpuBudgetTest, RealCgroupGivesAtLeastOneUsableCpuWithinTheMask) {
  const CpuBudget budget = usable_cpus();
  EXPECT_GE(budget.usable, 1);
  EXPECT_LE(budget.usable, std::max<int>(1, budget.allowed.size()));
}

TEST(CpuPinTest, PinningToAnAllowedCpuMovesTheThreadThere) {
  for (const int cpu : affinity_mask()) {
    int result = 1;
    int ran_on = -1;
    std::thread([&] {
      result = pin_current_thread(cpu);
      ran_on = sched_getcpu();
    }).join();
    EXPECT_EQ(result, 0) << "cpu " << cpu;
    EXPECT_EQ(ran_on, cpu);
  }
}

TEST(CpuPinTest, PinningToAnAbsentCpuReturnsANegativeErrno) {
  int huge = 0, negative = 0;
  std::thread([&] {
    huge = pin_current_thread(100000);
    negative = pin_current_thread(-1);
  }).join();
  EXPECT_EQ(huge, -EINVAL);
  EXPECT_EQ(negative, -EINVAL);
}

}  // namespace
}  // namespace corepool
