// ResourceProbe against a real child process: its CPU time lands in the
// window, it is found by parent pid, and memory samples cover it.
#include "supervisor/bench/resource_probe.h"

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include <gtest/gtest.h>

namespace corepool {
namespace {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

TEST(ResourceProbeTest, WindowCountsAChildsCpuTimeAndOurBlockingSwitches) {
  int done[2], release[2];
  ASSERT_EQ(pipe(done), 0);
  ASSERT_EQ(pipe(release), 0);
  ResourceProbe probe(20);
  const pid_t pid = fork();
  if (pid == 0) {
    char c = 0;
    if (read(release[0], &c, 1) != 1) _exit(2);  // start when the window is open
    const double start = process_cpu_seconds();
    volatile double x = 0;
    while (process_cpu_seconds() - start < 0.3) x = x + 1;  // burn 0.3 s of cpu
    if (write(done[1], &c, 1) != 1 || read(release[0], &c, 1) != 1) _exit(2);
    _exit(0);
  }
  ASSERT_GT(pid, 0);
  const auto children = child_pids();
  EXPECT_NE(std::find(children.begin(), children.end(), pid), children.end());
  probe.mark_start();
  char c = 1;
  ASSERT_EQ(write(release[1], &c, 1), 1);
  ASSERT_EQ(read(done[0], &c, 1), 1);  // blocks: a voluntary switch of ours
  probe.mark_end();
  ASSERT_EQ(write(release[1], &c, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (int fd : {done[0], done[1], release[0], release[1]}) close(fd);

  const ProbeWindow w = probe.window();
  EXPECT_GE(w.used.cpu_seconds, 0.29);
  EXPECT_GE(w.seconds, 0.29);
  EXPECT_GE(w.used.voluntary_switches, 1u);
  EXPECT_GT(w.rss_peak_kb, 0);
  EXPECT_GE(w.rss_peak_kb, w.rss_avg_kb);
  EXPECT_GT(w.pss_avg_kb, 0);
  const auto samples = probe.samples();
  ASSERT_GE(samples.size(), 2u);
  EXPECT_TRUE(std::is_sorted(samples.begin(), samples.end(),
                             [](const MemorySample& a, const MemorySample& b) { return a.seconds < b.seconds; }));
}

TEST(ResourceProbeTest, TheSamplerStaysWithinOnePercentOfACpu) {
  EXPECT_DOUBLE_EQ(sampler_pause_seconds(0.0002, 100), 0.1);   // cheap samples: the interval
  EXPECT_DOUBLE_EQ(sampler_pause_seconds(0.011, 100), 1.089);  // 11 ms per sample: 11 / (11 + 1089) = 1 %
  EXPECT_DOUBLE_EQ(sampler_pause_seconds(0.001, 100), 0.1);    // exactly 1 % at the interval
}

TEST(ResourceProbeTest, AnEmptyWindowReportsNothing) {
  ResourceProbe probe;
  const ProbeWindow w = probe.window();
  EXPECT_EQ(w.seconds, 0);
  EXPECT_EQ(w.rss_peak_kb, 0);
}

}  // namespace
}  // namespace corepool
