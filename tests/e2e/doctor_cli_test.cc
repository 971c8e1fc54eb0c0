// `corepool doctor` end to end: the real binary under planted conditions (a
// thread variable, a float64 model, a one-cpu affinity mask, the reference
// BLAS through LD_LIBRARY_PATH, a missing model), each read back from its line
// and from the exit code. The pure parsers and verdicts behind the lines are
// tested in-process in tests/engine/doctor_test.cc.
// The host's own load is not asserted: ctest -j2 runs other tests beside these.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace corepool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kReferenceBlas = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3";

struct DoctorLine {
  std::string verdict;
  std::string text;  // the whole line
};

struct DoctorRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::map<std::string, DoctorLine> lines;  // by check name
  std::vector<std::string> other;           // header, summary, and anything that leaked

  std::string verdict(const std::string& name) const {
    const auto it = lines.find(name);
    return it == lines.end() ? "(no line " + name + ")" : it->second.verdict;
  }
  std::string text(const std::string& name) const {
    const auto it = lines.find(name);
    return it == lines.end() ? "" : it->second.text;
  }
};

DoctorRun parse_doctor(testing::ProcessResult r) {
  DoctorRun run{r.exit_code, std::move(r.out), std::move(r.err), {}, {}};
  for (const std::string& line : testing::lines_of(run.out)) {
    std::istringstream words(line);
    std::string verdict, name;
    words >> verdict >> name;
    if (verdict == "OK" || verdict == "WARN" || verdict == "FAIL") {
      run.lines[name] = {verdict, line};
    } else {
      run.other.push_back(line);
    }
  }
  return run;
}

// Runs `prefix... corepool doctor --model M args...` with extra environment.
DoctorRun doctor(std::vector<std::string> args, const testing::TempDir& dir, const std::vector<std::string>& env = {},
                 std::vector<std::string> prefix = {}) {
  if (std::find(args.begin(), args.end(), "--model") == args.end()) {
    args.insert(args.begin(), {"--model", COREPOOL_DEFAULT_MODEL});
  }
  args.insert(args.begin(), {COREPOOL_BIN, "--log-level", "warn", "doctor"});
  prefix.insert(prefix.end(), args.begin(), args.end());
  return parse_doctor(testing::wait_process(testing::spawn_process(prefix, dir.path(), env), std::chrono::minutes(2)));
}

std::string context(const DoctorRun& run) { return "exit " + std::to_string(run.exit_code) + "\n" + run.out + run.err; }

class DoctorCliTest : public ::testing::Test {
 protected:
  // A thread variable in the test's own environment would leak into every
  // child and plant a condition the test did not ask for.
  void SetUp() override {
    for (const char* name : {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOMP_CPU_AFFINITY",
                             "KMP_AFFINITY", "LD_LIBRARY_PATH", "ATEN_CPU_CAPABILITY"}) {
      ::unsetenv(name);
    }
  }
  testing::TempDir dir_;
};

TEST_F(DoctorCliTest, CleanRunReportsEveryCheckWithBlasEnvAndModelOk) {
  const DoctorRun run = doctor({}, dir_);
  ASSERT_THAT(run.exit_code, ::testing::AnyOf(0, 1)) << context(run);  // other tests may load the cpus
  for (const char* name : {"libtorch", "blas", "onednn", "cpu-isa", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                           "OPENBLAS_NUM_THREADS", "allocator", "thp", "oversubscription", "cgroup-quota",
                           "affinity", "model", "forward", "cpu-load", "memory", "dev-shm"}) {
    EXPECT_TRUE(run.lines.count(name)) << name << "\n" << context(run);
  }
  for (const char* name : {"libtorch", "blas", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                           "allocator", "model", "forward"}) {
    EXPECT_EQ(run.verdict(name), "OK") << name << "\n" << context(run);
  }
  EXPECT_THAT(run.text("blas"), HasSubstr("openblas"));
  EXPECT_THAT(run.text("model"), HasSubstr("float32"));
  EXPECT_THAT(run.text("allocator"), HasSubstr("jemalloc"));
  for (const auto& [name, line] : run.lines) {
    if (line.verdict != "OK") {
      EXPECT_THAT(line.text, HasSubstr("fix: ")) << name;
    }
  }
  EXPECT_THAT(run.out, HasSubstr("FAIL: exit " + std::to_string(run.exit_code)));
  EXPECT_EQ(run.other.size(), 2u) << run.out;  // the header and the summary; every check is one line
}

TEST_F(DoctorCliTest, ThreadVariablesAboveTheIntraOpSettingWarn) {
  const DoctorRun run = doctor({"--intra-op-threads", "1"}, dir_,
                               {"OMP_NUM_THREADS=8", "OPENBLAS_NUM_THREADS=8", "MKL_NUM_THREADS=1"});
  EXPECT_GE(run.exit_code, 1) << context(run);
  EXPECT_EQ(run.verdict("OMP_NUM_THREADS"), "WARN") << context(run);
  EXPECT_EQ(run.verdict("OPENBLAS_NUM_THREADS"), "WARN") << context(run);
  EXPECT_EQ(run.verdict("MKL_NUM_THREADS"), "OK") << context(run);  // 1 is not above 1
  EXPECT_THAT(run.text("OMP_NUM_THREADS"), HasSubstr("fix: unset OMP_NUM_THREADS (corepool sets thread counts itself)"));
}

TEST_F(DoctorCliTest, AFloat64ModelWarnsOnTheModelLine) {
  fs::create_directories(dir_ / "f64");
  torch::jit::Module module = torch::jit::load(std::string(COREPOOL_DEFAULT_MODEL) + "/model.pt");
  module.to(torch::kDouble);
  module.save(dir_ / "f64/model.pt");
  fs::copy_file(std::string(COREPOOL_DEFAULT_MODEL) + "/model.toml", dir_ / "f64/model.toml");

  const DoctorRun run = doctor({"--model", dir_ / "f64"}, dir_);
  EXPECT_GE(run.exit_code, 1) << context(run);
  EXPECT_EQ(run.verdict("model"), "WARN") << context(run);
  EXPECT_THAT(run.text("model"), HasSubstr("float64"));
  EXPECT_THAT(run.text("model"), HasSubstr("module.to(torch::kFloat)"));
  // Its forward() then fails on float input; the TorchScript traceback must
  // not spill over several lines.
  EXPECT_EQ(run.other.size(), 2u) << run.out;
}

TEST_F(DoctorCliTest, TwoWorkersOnAOneCpuAffinityMaskWarnOfOversubscription) {
  const DoctorRun run = doctor({"--workers", "2"}, dir_, {}, {"/usr/bin/taskset", "-c", "0"});
  EXPECT_GE(run.exit_code, 1) << context(run);
  EXPECT_EQ(run.verdict("oversubscription"), "WARN") << context(run);
  EXPECT_THAT(run.text("oversubscription"), HasSubstr("on 1 usable cpu"));
  EXPECT_THAT(run.text("oversubscription"), HasSubstr("fix: --workers 1"));
  if (::sysconf(_SC_NPROCESSORS_ONLN) > 1) {
    EXPECT_EQ(run.verdict("affinity"), "WARN") << context(run);
  }
}

TEST_F(DoctorCliTest, ReferenceBlasOnTheLibraryPathFails) {
  fs::create_directories(dir_ / "refblas");
  fs::create_symlink(kReferenceBlas, dir_ / "refblas/libblas.so.3");
  const DoctorRun run = doctor({}, dir_, {"LD_LIBRARY_PATH=" + (dir_ / "refblas")});
  EXPECT_EQ(run.exit_code, 2) << context(run);
  EXPECT_EQ(run.verdict("blas"), "FAIL") << context(run);
  EXPECT_THAT(run.text("blas"), HasSubstr("reference BLAS"));
  EXPECT_THAT(run.text("blas"), HasSubstr("fix: remove " + (dir_ / "refblas") + " from LD_LIBRARY_PATH"));
}

TEST_F(DoctorCliTest, AMissingModelDirectoryFailsAndSkipsTheRoomChecks) {
  const DoctorRun run = doctor({"--model", dir_ / "no-such-model"}, dir_);
  EXPECT_EQ(run.exit_code, 2) << context(run);
  EXPECT_EQ(run.verdict("model"), "FAIL") << context(run);
  EXPECT_THAT(run.text("model"), HasSubstr(dir_ / "no-such-model"));
  EXPECT_EQ(run.lines.count("forward"), 0u);
  EXPECT_THAT(run.text("memory"), HasSubstr("not checked"));
}

TEST_F(DoctorCliTest, ConfigFileAndProcessModeReachTheChecks) {
  std::ofstream(dir_ / "corepool.toml") << "[engine]\nmode = \"process\"\nworkers = 3\nmax_batch = 2\n";
  const testing::ProcessResult r = testing::run_process(
      {COREPOOL_BIN, "--log-level", "warn", "--config", dir_ / "corepool.toml", "doctor", "--model",
       COREPOOL_DEFAULT_MODEL},
      dir_.path());
  const DoctorRun run = parse_doctor(r);
  EXPECT_THAT(run.text("oversubscription"), HasSubstr("3 workers x 1 intra-op thread"));
  EXPECT_THAT(run.text("forward"), HasSubstr("forward() of 2 silent segment(s)"));
  EXPECT_THAT(run.text("dev-shm"), HasSubstr("process mode needs"));
  EXPECT_THAT(run.text("memory"), HasSubstr("channel"));
}

// ---- The parsers and verdicts behind the lines ----

}  // namespace
}  // namespace corepool
