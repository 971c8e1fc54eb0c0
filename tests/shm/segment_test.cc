// Tests for shm/segment.h: size and zero fill, the name gone right after
// create, sharing with a forked child in both directions, read-only
// protection, and the sweep of names left by owners killed mid-create. The
// fixture checks that no test leaves a /dev/shm name of this process or of any
// child it forked.
#include "shm/segment.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/shm/test_support.h"
#include "tests/support/temp_dir.h"

namespace corepool::shm {
namespace {

namespace fs = std::filesystem;
using testing::after;
using testing::ExitStatus;
using testing::ChildProcess;
using testing::shm_names_of;
using namespace std::chrono_literals;

// A pipe for "I got this far" messages from a child: one byte per event,
// read with a deadline.
class Pipe {
 public:
  Pipe() { EXPECT_EQ(pipe2(fds_, O_CLOEXEC), 0); }
  ~Pipe() {
    close(fds_[0]);
    close(fds_[1]);
  }
  void send(char c) const { (void)!write(fds_[1], &c, 1); }
  // The next byte, or 0 if none came within `timeout_ms`.
  char receive(int timeout_ms = 10000) const {
    pollfd pfd{fds_[0], POLLIN, 0};
    char c = 0;
    if (poll(&pfd, 1, timeout_ms) == 1 && read(fds_[0], &c, 1) == 1) return c;
    return 0;
  }

 private:
  int fds_[2] = {-1, -1};
};

class SegmentTest : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_TRUE(shm_names_of(getpid()).empty()) << "this process left a /dev/shm name";
    for (const pid_t pid : children_) {
      EXPECT_TRUE(shm_names_of(pid).empty()) << "child " << pid << " left a /dev/shm name";
    }
  }

  ChildProcess spawn(const std::function<int()>& body) {
    ChildProcess child = ChildProcess::fork(body);
    children_.push_back(child.pid());
    return child;
  }

  std::vector<pid_t> children_;
};

// Blocks a child until it is killed (or, if the parent is gone, 60 s pass).
int park(const Pipe& never_written) {
  never_written.receive(60000);
  return 50;
}

TEST_F(SegmentTest, ACreatedSegmentIsZeroFilledAndAsLargeAsAsked) {
  constexpr std::size_t kBytes = 3 * 4096 + 100;
  Segment segment = Segment::create(kBytes, "test");
  ASSERT_NE(segment.data(), nullptr);
  EXPECT_EQ(segment.size(), kBytes);
  const auto* bytes = static_cast<const unsigned char*>(segment.data());
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < kBytes; ++i) nonzero += bytes[i] != 0;
  EXPECT_EQ(nonzero, 0u);
  std::memset(segment.data(), 0xab, kBytes);  // all of it is writable
}

TEST_F(SegmentTest, NoNameRemainsInDevShmWhileTheSegmentIsMapped) {
  Segment weights = Segment::create(4096, "weights");
  Segment rings = Segment::create(4096, "rings");
  EXPECT_TRUE(shm_names_of(getpid()).empty());
}

TEST_F(SegmentTest, AMovedSegmentKeepsItsMappingAndTheSourceIsEmpty) {
  Segment first = Segment::create(4096, "test");
  void* const data = first.data();
  static_cast<char*>(data)[0] = 7;
  Segment second = std::move(first);
  EXPECT_EQ(first.data(), nullptr);
  EXPECT_EQ(first.size(), 0u);
  EXPECT_EQ(second.data(), data);
  EXPECT_EQ(static_cast<char*>(second.data())[0], 7);
  Segment third;
  third = std::move(second);
  EXPECT_EQ(third.data(), data);
}

TEST_F(SegmentTest, CreateRejectsAnEmptySizeAndABadPurpose) {
  EXPECT_THROW(Segment::create(0, "test"), std::invalid_argument);
  EXPECT_THROW(Segment::create(4096, ""), std::invalid_argument);
  EXPECT_THROW(Segment::create(4096, "../escape"), std::invalid_argument);
}

TEST_F(SegmentTest, CreateSaysWhichSegmentTheSystemRefusedAndWhy) {
  const std::size_t huge = std::size_t{1} << 50;  // 1 PiB: more than any /dev/shm
  try {
    Segment::create(huge, "weights");
    FAIL() << "a 1 PiB segment was created";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot create shared memory segment 'weights' of " +
                        std::to_string(huge) + " bytes: "),
              std::string::npos)
        << what;
    EXPECT_GT(what.size(), what.find("bytes: ") + 7) << "the reason is missing: " << what;
  }
}

TEST_F(SegmentTest, AForkedChildSeesTheParentsWritesAndTheParentSeesTheChilds) {
  Segment segment = Segment::create(4096, "test");
  auto* words = new (segment.data()) std::atomic<uint64_t>[2];
  Pipe to_child;
  ChildProcess child = spawn([&] {
    if (to_child.receive() != 'w') return 30;
    if (words[0].load() != 0xfeedface) return 31;  // written after the fork
    words[1].store(0xc0ffee);
    return 0;
  });
  words[0].store(0xfeedface);
  to_child.send('w');
  const ExitStatus exit = child.wait(after(10s));
  ASSERT_EQ(exit.code, 0) << exit.describe();
  EXPECT_EQ(words[1].load(), 0xc0ffeeu);
}

TEST_F(SegmentTest, AChildWritingToAReadOnlySegmentDiesOfSigsegvAndTheParentLivesOn) {
  Segment segment = Segment::create(4096, "weights");
  auto* bytes = static_cast<volatile char*>(segment.data());
  bytes[0] = 42;
  ASSERT_EQ(segment.protect_read_only(), 0);
  ChildProcess child = spawn([&] {
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);  // an expected crash needs no core file
    // The kernel's default action: a sanitizer's handler would turn it into an abort.
    ::signal(SIGSEGV, SIG_DFL);
    if (bytes[0] != 42) return 40;      // reading is fine
    bytes[1] = 1;                       // must not return
    return 41;
  });
  const ExitStatus exit = child.wait(after(10s));
  EXPECT_EQ(exit.signal, SIGSEGV) << exit.describe();
  EXPECT_EQ(bytes[0], 42);
  EXPECT_EQ(bytes[1], 0);
  ASSERT_EQ(segment.protect_read_write(), 0);
  bytes[1] = 2;
  EXPECT_EQ(bytes[1], 2);
}

TEST_F(SegmentTest, ProtectingAnEmptySegmentFailsWithEinval) {
  Segment empty;
  EXPECT_EQ(empty.protect_read_only(), -EINVAL);
  EXPECT_EQ(empty.protect_read_write(), -EINVAL);
}

TEST_F(SegmentTest, AnOwnerKilledAfterCreateLeavesNoNameEvenWithoutASweep) {
  Pipe from_child;
  Pipe never;
  ChildProcess child = spawn([&] {
    Segment segment = Segment::create(1 << 20, "weights");
    static_cast<char*>(segment.data())[0] = 1;
    from_child.send('c');
    return park(never);
  });
  ASSERT_EQ(from_child.receive(), 'c');
  const pid_t pid = child.pid();
  const ExitStatus exit = child.kill_and_wait(SIGKILL, after(10s));
  EXPECT_EQ(exit.signal, SIGKILL) << exit.describe();
  EXPECT_TRUE(shm_names_of(pid).empty());
}

// The window between shm_open() and the name's removal, frozen: the child
// creates a name the way create() does, then dies before removing it.
TEST_F(SegmentTest, TheSweepRemovesANameWhoseOwnerDiedBeforeRemovingIt) {
  ChildProcess child = spawn([] {
    const std::string name = "/corepool." + std::to_string(getpid()) + ".0.weights";
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return 60;
    raise(SIGKILL);
    return 61;
  });
  const pid_t pid = child.pid();
  const ExitStatus exit = child.wait(after(10s));
  ASSERT_EQ(exit.signal, SIGKILL) << exit.describe();
  ASSERT_EQ(shm_names_of(pid).size(), 1u) << "the frozen window left no name to sweep";
  EXPECT_GE(sweep_dead_segments(), 1);
  EXPECT_TRUE(shm_names_of(pid).empty());
}

// An owner killed at whatever point of create() it happens to be in.
TEST_F(SegmentTest, AnOwnerKilledWhileCreatingSegmentsLeavesNothingAfterTheSweep) {
  Pipe from_child;
  ChildProcess child = spawn([&] {
    for (uint64_t i = 0;; ++i) {
      Segment segment = Segment::create(64 * 1024, "weights");
      if (i == 100) from_child.send('r');
    }
    return 70;
  });
  ASSERT_EQ(from_child.receive(), 'r');
  const pid_t pid = child.pid();
  const ExitStatus exit = child.kill_and_wait(SIGKILL, after(10s));
  ASSERT_EQ(exit.signal, SIGKILL) << exit.describe();
  EXPECT_GE(sweep_dead_segments(), 0);
  EXPECT_TRUE(shm_names_of(pid).empty());
}

class SweepTest : public ::testing::Test {
 protected:
  void touch(const std::string& name) const { std::ofstream(dir_ / name) << "x"; }
  bool exists(const std::string& name) const { return fs::exists(dir_ / name); }

  testing::TempDir temp_{"corepool-sweep"};
  const fs::path dir_ = temp_.path();
};

TEST_F(SweepTest, OnlyNamesOfDeadOwnersAreRemoved) {
  const std::string dead = std::to_string(testing::dead_pid());
  const std::string alive = std::to_string(getpid());
  touch("corepool." + dead + ".0.weights");
  touch("corepool." + dead + ".17.rings");
  touch("corepool." + alive + ".0.weights");
  touch("corepool.1.0.init");             // pid 1 is alive
  touch("corepool.notapid.0.weights");    // not our shape
  touch("corepool." + dead + "weights");  // no dot after the pid
  touch("other." + dead + ".0.weights");
  EXPECT_EQ(sweep_dead_segments(dir_.string()), 2);
  EXPECT_FALSE(exists("corepool." + dead + ".0.weights"));
  EXPECT_FALSE(exists("corepool." + dead + ".17.rings"));
  EXPECT_TRUE(exists("corepool." + alive + ".0.weights"));
  EXPECT_TRUE(exists("corepool.1.0.init"));
  EXPECT_TRUE(exists("corepool.notapid.0.weights"));
  EXPECT_TRUE(exists("corepool." + dead + "weights"));
  EXPECT_TRUE(exists("other." + dead + ".0.weights"));
}

TEST_F(SweepTest, AMissingDirectoryIsReportedAsMinusErrno) {
  EXPECT_EQ(sweep_dead_segments((dir_ / "missing").string()), -ENOENT);
}

}  // namespace
}  // namespace corepool::shm
