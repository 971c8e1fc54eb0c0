// Notifier (sd_notify) against a NotifyListener standing in for systemd: the
// datagrams of each call, the no-op without NOTIFY_SOCKET, the watchdog
// interval from WATCHDOG_USEC/WATCHDOG_PID, and a failed send logged once.
#include "supervisor/systemd/notifier.h"

#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "tests/support/notify_listener.h"
#include "tests/support/scratch_dir_test.h"

namespace corepool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using testing::NotifyListener;
using namespace std::chrono_literals;

constexpr const char* kSystemdVars[] = {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"};

std::uint64_t monotonic_usec() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u + static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

// The listener is a member so that its socket is open before the fd count is
// taken; every test starts and ends with systemd's variables unset.
class NotifierTest : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    for (const char* v : kSystemdVars) ::unsetenv(v);
    ScratchDirTest::SetUp();
  }
  void TearDown() override {
    for (const char* v : kSystemdVars) ::unsetenv(v);
    ScratchDirTest::TearDown();
  }
  void under_systemd() { ::setenv("NOTIFY_SOCKET", listener_.path().c_str(), 1); }

  NotifyListener listener_;
};

TEST_F(NotifierTest, ReadySendsReadyAndStatusInOneDatagram) {
  under_systemd();
  Notifier n;
  ASSERT_TRUE(n.enabled());
  n.ready("serving on 127.0.0.1:8080");
  ASSERT_TRUE(listener_.wait_for(NotifyListener::has("READY=1"), 10s));
  EXPECT_THAT(listener_.messages(), ElementsAre("READY=1", "STATUS=serving on 127.0.0.1:8080"));
  ASSERT_THAT(listener_.datagrams(), SizeIs(1));
  EXPECT_EQ(listener_.datagrams()[0].pid, ::getpid());
}

TEST_F(NotifierTest, StatusSendsOneLine) {
  under_systemd();
  Notifier n;
  n.status("2 of 4 workers ready");
  ASSERT_TRUE(listener_.wait_for([](const auto& m) { return !m.empty(); }, 10s));
  EXPECT_THAT(listener_.messages(), ElementsAre("STATUS=2 of 4 workers ready"));
}

TEST_F(NotifierTest, NewlinesInAStatusCannotAddAssignments) {
  under_systemd();
  Notifier n;
  n.status("bad model\nREADY=1");
  ASSERT_TRUE(listener_.wait_for([](const auto& m) { return !m.empty(); }, 10s));
  EXPECT_THAT(listener_.messages(), ElementsAre("STATUS=bad model READY=1"));
}

TEST_F(NotifierTest, ReloadingCarriesTheCurrentMonotonicTime) {
  under_systemd();
  Notifier n;
  const std::uint64_t before = monotonic_usec();
  n.reloading();
  const std::uint64_t after = monotonic_usec();
  ASSERT_TRUE(listener_.wait_for(NotifyListener::has("RELOADING=1"), 10s));
  const std::vector<std::string> m = listener_.messages();
  ASSERT_THAT(m, SizeIs(2));
  EXPECT_EQ(m[0], "RELOADING=1");
  ASSERT_EQ(m[1].rfind("MONOTONIC_USEC=", 0), 0u) << m[1];
  const std::uint64_t usec = std::stoull(m[1].substr(15));
  EXPECT_GE(usec, before);
  EXPECT_LE(usec, after);
}

TEST_F(NotifierTest, StoppingAndWatchdogArriveInOrderAndTheEnvironmentStays) {
  under_systemd();
  Notifier n;
  n.watchdog();
  n.stopping();
  n.watchdog();
  ASSERT_TRUE(listener_.wait_for([](const auto& m) { return m.size() >= 3; }, 10s));
  EXPECT_THAT(listener_.messages(), ElementsAre("WATCHDOG=1", "STOPPING=1", "WATCHDOG=1"));
  ASSERT_NE(std::getenv("NOTIFY_SOCKET"), nullptr) << "a Notifier must not unset NOTIFY_SOCKET";
  EXPECT_EQ(std::getenv("NOTIFY_SOCKET"), listener_.path());
}

TEST_F(NotifierTest, EveryCallIsANoOpWithoutNotifySocket) {
  ::setenv("WATCHDOG_USEC", "30000000", 1);  // not run by systemd: ignored
  Notifier n;
  EXPECT_FALSE(n.enabled());
  n.ready("x");
  n.status("x");
  n.reloading();
  n.stopping();
  n.watchdog();
  EXPECT_EQ(n.watchdog_interval(), std::nullopt);
  // Setting the variable later does not turn a disabled Notifier on, and the
  // listener (which nobody was told about) got nothing.
  under_systemd();
  n.ready("late");
  EXPECT_THAT(listener_.messages(), SizeIs(0));
}

TEST_F(NotifierTest, WatchdogIntervalComesFromWatchdogUsec) {
  under_systemd();
  ::setenv("WATCHDOG_USEC", "30000000", 1);
  ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
  Notifier n;
  EXPECT_EQ(n.watchdog_interval(), std::chrono::microseconds(30000000));
  EXPECT_EQ(n.watchdog_interval(), std::chrono::microseconds(30000000)) << "asking twice must not unset it";
  ::unsetenv("WATCHDOG_PID");  // no WATCHDOG_PID: meant for whoever reads it
  EXPECT_EQ(n.watchdog_interval(), std::chrono::microseconds(30000000));
}

TEST_F(NotifierTest, WatchdogIntervalIsForTheWatchedPidOnly) {
  under_systemd();
  ::setenv("WATCHDOG_USEC", "30000000", 1);
  ::setenv("WATCHDOG_PID", std::to_string(::getppid()).c_str(), 1);  // e.g. a forked worker's view
  EXPECT_EQ(Notifier().watchdog_interval(), std::nullopt);
}

TEST_F(NotifierTest, WatchdogIntervalIsEmptyWithoutWatchdogUsec) {
  under_systemd();
  EXPECT_EQ(Notifier().watchdog_interval(), std::nullopt);
}

TEST_F(NotifierTest, ASendFailureIsLoggedOnceAndNeverThrows) {
  ::setenv("NOTIFY_SOCKET", (dir_ + "/nobody-listens.sock").c_str(), 1);
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_st>(log)));
  {
    Notifier n;
    EXPECT_TRUE(n.enabled());
    EXPECT_NO_THROW(n.ready("a"));
    EXPECT_NO_THROW(n.watchdog());
    EXPECT_NO_THROW(n.stopping());
  }
  spdlog::set_default_logger(previous);
  const std::string text = log.str();
  EXPECT_THAT(text, HasSubstr("sd_notify(READY=1) to " + dir_ + "/nobody-listens.sock failed"));
  EXPECT_EQ(text.find("sd_notify", text.find("sd_notify") + 1), std::string::npos) << text;
}

// The lead's serve loop pings from a timer while other threads report status.
TEST_F(NotifierTest, ThreadsMaySendConcurrently) {
  under_systemd();
  Notifier n;
  constexpr int kThreads = 4, kEach = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&n] {
      for (int i = 0; i < kEach; ++i) n.watchdog();
    });
  }
  // Drains while the senders run: the kernel queues only a few datagrams per socket.
  const bool all = listener_.wait_for([](const auto& m) { return m.size() >= kThreads * kEach; }, 30s);
  for (auto& t : threads) t.join();
  ASSERT_TRUE(all);
  for (const std::string& m : listener_.messages()) EXPECT_EQ(m, "WATCHDOG=1");
}

}  // namespace
}  // namespace corepool
