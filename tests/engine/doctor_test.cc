// The pure parsers and verdicts behind `corepool doctor`'s lines, in-process:
// /proc and cgroup text, host checks, capacity, the model's dtype. The doctor
// binary itself is run end to end in tests/e2e/doctor_cli_test.cc.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include "supervisor/doctor/doctor_capacity.h"
#include "supervisor/doctor/doctor_check.h"
#include "supervisor/doctor/doctor_host.h"
#include "supervisor/doctor/doctor_model.h"
#include "supervisor/doctor/doctor_optimize.h"
#include "supervisor/doctor/doctor_procfs.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kReferenceBlas = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3";

TEST(DoctorProcfsTest, SelectedChoiceIsTheBracketedWord) {
  EXPECT_EQ(selected_choice("always [madvise] never\n"), "madvise");
  EXPECT_EQ(selected_choice("always defer [defer+madvise] madvise never"), "defer+madvise");
  EXPECT_EQ(selected_choice("always madvise never"), "");
}

TEST(DoctorProcfsTest, MeminfoFieldsComeBackInBytes) {
  const std::string meminfo = "MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n";
  EXPECT_EQ(meminfo_bytes(meminfo, "MemAvailable"), 20000000ull * 1024);
  EXPECT_EQ(meminfo_bytes(meminfo, "MemFree"), 100ull * 1024);
  EXPECT_FALSE(meminfo_bytes(meminfo, "SwapFree"));
  EXPECT_FALSE(meminfo_bytes("MemAvailable: lots\n", "MemAvailable"));
}

TEST(DoctorProcfsTest, CpuJiffiesSumOnlyTheNamedCpusAndCountStealAsBusy) {
  const std::string stat =
      "cpu  1000 0 1000 8000 0 0 0 0 0 0\n"
      "cpu0 10 1 2 100 5 3 4 6 99 99\n"
      "cpu1 20 0 0 80 0 0 0 0 0 0\n"
      "intr 12345\n";
  const CpuJiffies cpu0 = cpu_jiffies(stat, {0});
  EXPECT_EQ(cpu0.busy, 10u + 1 + 2 + 3 + 4 + 6);  // guest fields are inside user already
  EXPECT_EQ(cpu0.total, cpu0.busy + 100 + 5);
  const CpuJiffies both = cpu_jiffies(stat, {0, 1});
  EXPECT_EQ(both.busy, cpu0.busy + 20);
  EXPECT_EQ(cpu_jiffies(stat, {7}).total, 0u);
}

TEST(DoctorProcfsTest, ProcessTicksAreCountedFromTheLastParenthesis) {
  const std::string stat = "4242 (we (ird) name) R 1 2 3 4 5 6 7 8 9 10 111 222 0 0 20 0 1 0";
  EXPECT_EQ(process_cpu_ticks(stat), 333u);
  EXPECT_FALSE(process_cpu_ticks("garbage"));
}

TEST(DoctorProcfsTest, CgroupPathsAndLimitsParse) {
  EXPECT_EQ(unified_cgroup_path("0::/system.slice/corepool.service\n"), "/system.slice/corepool.service");
  EXPECT_FALSE(unified_cgroup_path("4:cpu,cpuacct:/a\n"));
  EXPECT_EQ(cgroup_bytes("1073741824\n"), 1073741824u);
  EXPECT_FALSE(cgroup_bytes("max\n"));
}

TEST(DoctorProcfsTest, ThreadCountsReadTheOuterLevel) {
  EXPECT_EQ(thread_count("8"), 8);
  EXPECT_EQ(thread_count("4,2"), 4);
  EXPECT_FALSE(thread_count("0"));
  EXPECT_FALSE(thread_count("many"));
}

TEST(DoctorHostTest, ThreadVariablesWarnOnlyAboveTheIntraOpSetting) {
  EXPECT_EQ(thread_env_verdict("OMP_NUM_THREADS", std::nullopt, 1).verdict, Verdict::kOk);
  EXPECT_EQ(thread_env_verdict("OMP_NUM_THREADS", "2", 2).verdict, Verdict::kOk);
  const CheckResult above = thread_env_verdict("MKL_NUM_THREADS", "8", 2);
  EXPECT_EQ(above.verdict, Verdict::kWarn);
  EXPECT_EQ(above.fix, "unset MKL_NUM_THREADS (corepool sets thread counts itself)");
  EXPECT_EQ(thread_env_verdict("OMP_NUM_THREADS", "lots", 1).verdict, Verdict::kWarn);
  EXPECT_EQ(pinning_env_verdict("GOMP_CPU_AFFINITY", "0-3").verdict, Verdict::kWarn);
  EXPECT_EQ(pinning_env_verdict("KMP_AFFINITY", "disabled").verdict, Verdict::kOk);
}

TEST(DoctorHostTest, BlasVerdictFollowsTheLibraryThatProvidesSgemm) {
  const BlasLibrary reference{"/usr/lib/x86_64-linux-gnu/libblas.so.3", kReferenceBlas + std::string(".11.0"), ""};
  const CheckResult alternative = blas_verdict(reference, "");
  EXPECT_EQ(alternative.verdict, Verdict::kFail);
  EXPECT_THAT(alternative.fix, HasSubstr("update-alternatives --set libblas.so.3-x86_64-linux-gnu"));

  const BlasLibrary planted{"/opt/ref/libblas.so.3", kReferenceBlas, ""};
  EXPECT_THAT(blas_verdict(planted, "/usr/local/lib:/opt/ref/").fix, HasSubstr("remove /opt/ref from LD_LIBRARY_PATH"));

  const BlasLibrary openblas{"/lib/x86_64-linux-gnu/libblas.so.3",
                             "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3", "OpenBLAS 0.3.21 Haswell"};
  const CheckResult good = blas_verdict(openblas, "");
  EXPECT_EQ(good.verdict, Verdict::kOk);
  EXPECT_THAT(good.found, HasSubstr("OpenBLAS 0.3.21 Haswell"));
  EXPECT_EQ(blas_verdict(BlasLibrary{}, "").verdict, Verdict::kWarn);
  EXPECT_EQ(blas_verdict({"/opt/x/libfoo.so", "/opt/x/libfoo.so", ""}, "").verdict, Verdict::kWarn);
}

TEST(DoctorHostTest, IsaWarnsWithoutAvx2AndReportsAvx512AndAmx) {
  const std::string cpuinfo = "processor : 0\nflags : fpu sse4_2 avx avx2 fma avx512f amx_tile amx_bf16\n\n"
                              "processor : 1\nflags : fpu\n";
  const CheckResult modern = isa_verdict(cpu_flags(cpuinfo), std::nullopt);
  EXPECT_EQ(modern.verdict, Verdict::kOk);
  EXPECT_EQ(modern.found, "AVX2 yes, AVX-512 yes, AMX yes");
  EXPECT_EQ(isa_verdict({"sse4_2", "avx"}, std::nullopt).verdict, Verdict::kWarn);
  EXPECT_EQ(isa_verdict({"avx2", "fma"}, std::string("default")).verdict, Verdict::kWarn);
}

TEST(DoctorHostTest, AllocatorWarnsOnGlibcWithTheFixForWhyItRuns) {
  EXPECT_EQ(allocator_verdict("jemalloc", "jemalloc").verdict, Verdict::kOk);
  EXPECT_THAT(allocator_verdict("system", "system").fix, HasSubstr("allocator = \"jemalloc\""));
  EXPECT_THAT(allocator_verdict("system", "jemalloc").fix, HasSubstr("libjemalloc2"));
}

class ThpTest : public ::testing::Test {
 protected:
  void plant(const std::string& enabled, const std::string& defrag) {
    const std::string dir = dir_ / "kernel/mm/transparent_hugepage";
    fs::create_directories(dir);
    std::ofstream(dir + "/enabled") << enabled << "\n";
    std::ofstream(dir + "/defrag") << defrag << "\n";
  }
  testing::TempDir dir_;
};

TEST_F(ThpTest, AlwaysWithDirectCompactionWarns) {
  plant("[always] madvise never", "[always] defer defer+madvise madvise never");
  const CheckResult r = thp_check(dir_.path());
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_THAT(r.fix, HasSubstr("defer+madvise"));
}

TEST_F(ThpTest, NeverMadviseAndAlwaysWithoutStallsAreOk) {
  plant("always madvise [never]", "always defer defer+madvise [madvise] never");
  EXPECT_EQ(thp_check(dir_.path()).verdict, Verdict::kOk);
  plant("always [madvise] never", "[always] defer defer+madvise madvise never");
  EXPECT_EQ(thp_check(dir_.path()).verdict, Verdict::kOk);
  plant("[always] madvise never", "always defer [defer+madvise] madvise never");
  EXPECT_EQ(thp_check(dir_.path()).verdict, Verdict::kOk);
}

TEST_F(ThpTest, AKernelWithoutThpIsOkAndGarbageWarns) {
  EXPECT_THAT(thp_check(dir_.path()).found, HasSubstr("not available"));
  plant("nonsense", "nonsense");
  EXPECT_EQ(thp_check(dir_.path()).verdict, Verdict::kWarn);
}

CpuBudget budget_of(int allowed, double quota) {
  CpuBudget b;
  for (int i = 0; i < allowed; ++i) b.allowed.push_back(i);
  b.quota_cpus = quota;
  b.usable = quota > 0 ? std::min(allowed, static_cast<int>(std::ceil(quota))) : allowed;
  return b;
}

TEST(DoctorCapacityTest, ThreadsAboveCpusQuotaOrMaskWarn) {
  WorkerPlan plan{"thread", 4, true, 2};
  auto checks = cpu_budget_checks(plan, budget_of(8, 0), 8);
  ASSERT_EQ(checks.size(), 3u);
  EXPECT_EQ(checks[0].verdict, Verdict::kOk);  // 8 threads on 8 cpus
  EXPECT_EQ(checks[1].verdict, Verdict::kOk);  // no quota
  EXPECT_EQ(checks[2].verdict, Verdict::kOk);  // full mask

  checks = cpu_budget_checks(plan, budget_of(8, 6.5), 8);
  EXPECT_EQ(checks[1].verdict, Verdict::kWarn);
  EXPECT_THAT(checks[1].found, HasSubstr("cgroup quota 6.5 cpus for 8 compute threads"));
  EXPECT_THAT(checks[1].fix, HasSubstr("--workers 3"));  // floor(6.5) / 2 intra-op threads

  checks = cpu_budget_checks(WorkerPlan{"process", 4, true, 1}, budget_of(2, 0), 8);
  EXPECT_EQ(checks[0].verdict, Verdict::kWarn);
  EXPECT_EQ(checks[2].verdict, Verdict::kWarn);
  EXPECT_THAT(checks[2].fix, HasSubstr("--workers 2"));

  // Workers sized from the mask itself: nothing to warn about.
  checks = cpu_budget_checks(WorkerPlan{"process", 2, false, 1}, budget_of(2, 0), 8);
  EXPECT_EQ(checks[0].verdict, Verdict::kOk);
  EXPECT_EQ(checks[2].verdict, Verdict::kOk);
}

TEST(DoctorCapacityTest, OtherProcessesAboveAQuarterOfTheCpusWarn) {
  const CheckResult quiet = cpu_load_verdict(40, 400, 2, 2);  // 0.2 cpus = 10 %
  EXPECT_EQ(quiet.verdict, Verdict::kOk);
  EXPECT_THAT(quiet.found, HasSubstr("use 0.2 of 2 usable cpus (10 %)"));
  const CheckResult busy = cpu_load_verdict(240, 400, 2, 2);         // 1.2 cpus = 60 %
  EXPECT_EQ(busy.verdict, Verdict::kWarn);
  EXPECT_THAT(busy.found, HasSubstr("60 %"));
  EXPECT_THAT(busy.fix, HasSubstr("--workers 1"));
  EXPECT_EQ(cpu_load_verdict(0, 0, 2, 2).verdict, Verdict::kOk);
}

TEST(DoctorCapacityTest, MemoryFailsBelowTheNeedAndWarnsBelowTwice) {
  const uint64_t mb = 1 << 20;
  const MemoryNeed need = memory_need(WorkerPlan{"process", 4, true, 1}, 100 * mb, 10 * mb, 5 * mb);
  EXPECT_EQ(need.total(), 100 * mb + 4 * (need.worker_base + need.activations + 5 * mb));
  EXPECT_GE(need.activations, 10 * mb);
  const MemoryNeed threads = memory_need(WorkerPlan{"thread", 4, true, 1}, 100 * mb, 10 * mb, 5 * mb);
  EXPECT_EQ(threads.channel, 0u);  // thread mode has no channel segments
  EXPECT_EQ(threads.activations, 20 * mb);  // each engine thread's arena keeps twice one peak

  EXPECT_EQ(memory_verdict(need, {need.total() - 1, std::nullopt}).verdict, Verdict::kFail);
  EXPECT_EQ(memory_verdict(need, {2 * need.total() - 1, std::nullopt}).verdict, Verdict::kWarn);
  EXPECT_EQ(memory_verdict(need, {2 * need.total(), std::nullopt}).verdict, Verdict::kOk);
  const CheckResult capped = memory_verdict(need, {100 * need.total(), need.total() / 2});
  EXPECT_EQ(capped.verdict, Verdict::kFail);
  EXPECT_THAT(capped.found, HasSubstr("cgroup memory.max"));
  EXPECT_EQ(memory_verdict(need, {}).verdict, Verdict::kWarn);
}

TEST(DoctorCapacityTest, MemoryRoomReadsMeminfoAndTheTightestCgroupLimit) {
  testing::TempDir dir;
  HostPaths paths;
  paths.proc = dir / "proc";
  paths.cgroup = dir / "cgroup";
  fs::create_directories(dir / "proc/self");
  fs::create_directories(dir / "cgroup/svc/app");
  std::ofstream(dir / "proc/meminfo") << "MemTotal: 9000000 kB\nMemAvailable: 4000000 kB\n";
  std::ofstream(dir / "proc/self/cgroup") << "0::/svc/app\n";
  std::ofstream(dir / "cgroup/svc/memory.max") << "1073741824\n";
  std::ofstream(dir / "cgroup/svc/memory.current") << "536870912\n";
  std::ofstream(dir / "cgroup/svc/app/memory.max") << "max\n";
  std::ofstream(dir / "cgroup/svc/app/memory.current") << "1000\n";
  const MemoryRoom room = read_memory_room(paths);
  EXPECT_EQ(room.mem_available, 4000000ull * 1024);
  EXPECT_EQ(room.cgroup_headroom, 536870912u);
}

TEST(DoctorCapacityTest, DevShmMattersOnlyInProcessMode) {
  const WorkerPlan process{"process", 2, true, 1};
  EXPECT_EQ(shm_verdict(WorkerPlan{"thread", 2, true, 1}, 100, 0, "/dev/shm").verdict, Verdict::kOk);
  EXPECT_EQ(shm_verdict(process, 100, 99, "/dev/shm").verdict, Verdict::kFail);
  EXPECT_EQ(shm_verdict(process, 100, 199, "/dev/shm").verdict, Verdict::kWarn);
  EXPECT_EQ(shm_verdict(process, 100, 200, "/dev/shm").verdict, Verdict::kOk);
  EXPECT_EQ(shm_verdict(process, 100, std::nullopt, "/dev/shm").verdict, Verdict::kFail);
}

TEST(DoctorModelTest, Float64WeightsWarn) {
  EXPECT_EQ(model_verdict("m", {{"float32", 1000}}, 3).verdict, Verdict::kOk);
  const CheckResult doubles = model_verdict("m", {{"float32", 1000}, {"float64", 8}}, 4);
  EXPECT_EQ(doubles.verdict, Verdict::kWarn);
  EXPECT_THAT(doubles.found, HasSubstr("float64"));
}

// The plan line and the "kernels" line name the path in use: here the
// portable one, which every CPU runs; the "kernels" line lists torch and auto,
// which every CPU runs too.
TEST(DoctorModelTest, ThePlanAndTheKernelsLineNameThePathInUse) {
  EnginePlan plan;
  const CheckResult line = plan_check(load_model(COREPOOL_DEFAULT_MODEL), "onednn", "portable", 2, plan);
  EXPECT_EQ(line.verdict, Verdict::kOk) << line.found;
  EXPECT_THAT(line.found, HasSubstr("optimize onednn, kernels portable in "));
  const CheckResult kernels = kernels_check(plan);
  EXPECT_EQ(kernels.verdict, Verdict::kOk);
  EXPECT_THAT(kernels.found, HasSubstr("in use: portable (engine.kernels = portable)"));
  EXPECT_THAT(kernels.found, HasSubstr("this CPU runs engine.kernels = auto, "));
  EXPECT_THAT(kernels.found, HasSubstr("portable, torch"));
}

TEST(DoctorModelTest, AnUnknownKernelPathFailsThePlanLineNamingTheKey) {
  EnginePlan plan;
  const CheckResult line = plan_check(load_model(COREPOOL_DEFAULT_MODEL), "onednn", "avx2", 2, plan);
  EXPECT_EQ(line.verdict, Verdict::kFail);
  EXPECT_THAT(line.found, HasSubstr("engine.kernels"));
}

TEST(DoctorCheckTest, LinesCarryVerdictNameFoundAndFix) {
  EXPECT_EQ(format_check(CheckResult::ok("blas", "OpenBLAS")).rfind("OK    blas", 0), 0u);
  const std::string line = format_check(CheckResult::fail("memory", "need 2 GB", "fewer workers"));
  EXPECT_EQ(line.rfind("FAIL  memory", 0), 0u);
  EXPECT_THAT(line, HasSubstr("need 2 GB  fix: fewer workers"));
  EXPECT_THAT(format_check(CheckResult::ok("x", "y")), Not(HasSubstr("fix:")));
  EXPECT_EQ(worst_verdict({CheckResult::ok("a", ""), CheckResult::warn("b", "", "f")}), Verdict::kWarn);
  EXPECT_EQ(human_bytes(20ull << 30), "20.0 GB");
  EXPECT_EQ(human_bytes(3ull << 20), "3.0 MB");
}

}  // namespace
}  // namespace corepool
