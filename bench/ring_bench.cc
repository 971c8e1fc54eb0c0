// corepool-ring-bench: what one 32-byte descriptor costs between two processes,
// measured in one run on this machine: the shm ring one way and round trip
// (both sides spinning, spinning then futex, futex only), against a Unix-domain
// socketpair and a pair of pipes (and a bare atomic ping-pong as the floor),
// plus the CPU an idle waiting consumer burns.
// Prints a table and the ratios the design states its targets in. Each child
// is forked, pinned to its own cpu and killed at its deadline; < 60 s in all.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "shm/ring.h"
#include "shm/segment.h"
#include "shm/wake.h"

namespace {

using corepool::shm::cpu_relax;
using corepool::shm::RingConsumer;
using corepool::shm::RingData;
using corepool::shm::RingProducer;
using corepool::shm::Segment;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr uint32_t kMaxRoundTrips = 200000;
constexpr auto kRoundTripBudget = 4s;  // per latency row: the futex rows stop here
constexpr auto kThroughputTime = 1s;
constexpr auto kIdleTime = 1s;
constexpr auto kChildDeadline = 20s;  // a child still running after this is killed

struct Descriptor {
  uint64_t seq;
  uint64_t offset;
  uint32_t bytes;
  uint32_t kind;
  uint64_t check;
};
static_assert(sizeof(Descriptor) == 32);
constexpr uint32_t kData = 0;
constexpr uint32_t kStop = 1;

Descriptor descriptor(uint64_t seq, uint32_t kind = kData) {
  return Descriptor{seq, seq * 64, 32, kind, ~seq};
}

using ThroughputRing = RingData<Descriptor, 4096>;
using EchoRing = RingData<Descriptor, 1024>;

// ---- processes and cpus --------------------------------------------------

struct Cpus {
  int parent = -1;
  int child = -1;  // -1: fewer than two cpus, nobody is pinned
};

Cpus pick_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> allowed;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) allowed.push_back(cpu);
    }
  }
  if (allowed.size() < 2) return Cpus{};
  return Cpus{allowed[0], allowed[1]};
}

void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) std::perror("sched_setaffinity");
}

struct ChildResult {
  bool ok = false;
  rusage usage{};
  std::string why;
};

// A forked child pinned to cpus.child; reaped (and killed at its deadline) by wait().
class Child {
 public:
  Child(const Cpus& cpus, const std::function<int()>& body) {
    std::fflush(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      pin(cpus.child);
      _exit(body());
    }
  }
  ~Child() { wait(Clock::now()); }

  ChildResult wait(Clock::time_point deadline) {
    ChildResult result;
    if (pid_ <= 0) return result;
    if (!exits_before(deadline)) {
      kill(pid_, SIGKILL);
      result.why = "child killed at its deadline; ";
    }
    int status = 0;
    while (wait4(pid_, &status, 0, &result.usage) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    result.ok = result.why.empty() && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      result.why += "child exit code " + std::to_string(WEXITSTATUS(status));
    }
    return result;
  }

 private:
  bool exits_before(Clock::time_point deadline) {
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
    if (pidfd < 0) return false;
    int rc = 0;
    do {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd pfd{pidfd, POLLIN, 0};
      rc = poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    } while (rc < 0 && errno == EINTR);
    close(pidfd);
    return rc > 0;
  }

  pid_t pid_ = -1;
};

// Spins until `flag` is non-zero or `deadline`; for start-up handshakes.
bool spin_until_set(const std::atomic<uint32_t>& flag, Clock::time_point deadline) {
  for (uint64_t i = 0; flag.load(std::memory_order_acquire) == 0; ++i) {
    if (i % 1024 == 0 && Clock::now() > deadline) return false;
    cpu_relax();
  }
  return true;
}

// ---- statistics ----------------------------------------------------------

struct Latency {
  size_t count = 0;
  double p50_ns = 0;
  double p99_ns = 0;
  std::string error;
};

Latency summarize(std::vector<int64_t> ns) {
  Latency l;
  l.count = ns.size();
  if (ns.empty()) return l;
  std::sort(ns.begin(), ns.end());
  l.p50_ns = static_cast<double>(ns[ns.size() / 2]);
  l.p99_ns = static_cast<double>(ns[std::min(ns.size() - 1, ns.size() * 99 / 100)]);
  return l;
}

// One round trip per iteration; one clock read per sample (the next
// sample starts where the last one ended).
template <typename RoundTrip>
std::vector<int64_t> sample_round_trips(RoundTrip round_trip) {
  for (int i = 0; i < 2000; ++i) {
    if (!round_trip(i)) return {};  // warm-up: caches, page tables, frequency
  }
  std::vector<int64_t> samples;
  samples.reserve(kMaxRoundTrips);
  const auto stop_at = Clock::now() + kRoundTripBudget;
  auto t0 = Clock::now();
  for (uint64_t i = 0; i < kMaxRoundTrips && t0 < stop_at; ++i) {
    if (!round_trip(2000 + i)) return {};
    const auto t1 = Clock::now();
    samples.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    t0 = t1;
  }
  return samples;
}

// ---- (a) one-way throughput ----------------------------------------------

struct ThroughputShared {
  ThroughputRing ring;
  alignas(64) std::atomic<uint32_t> ready{0};
  alignas(64) std::atomic<uint32_t> done{0};
  uint64_t consumed = 0;  // written by the child before done = 1
};

// Busy consumer: polls front() and checks every sequence number.
int consume_until_stop(ThroughputShared* shared) {
  RingConsumer<Descriptor, 4096> in(&shared->ring);
  shared->ready.store(1, std::memory_order_release);
  const auto deadline = Clock::now() + kChildDeadline;
  for (uint64_t count = 0, polls = 0;;) {
    const Descriptor* d = in.front();
    if (d == nullptr) {
      if (++polls % 4096 == 0 && Clock::now() > deadline) return 2;
      cpu_relax();
      continue;
    }
    if (d->seq != count) return 3;
    if (d->kind == kStop) {
      shared->consumed = count;
      shared->done.store(1, std::memory_order_release);
      return 0;
    }
    in.pop();
    ++count;
  }
}

// Descriptors per second; `batch` pushes share one wake_consumer().
double ring_throughput(const Cpus& cpus, uint32_t batch, std::string* error) {
  Segment segment = Segment::create(sizeof(ThroughputShared), "bench");
  auto* shared = new (segment.data()) ThroughputShared;
  Child child(cpus, [&] { return consume_until_stop(shared); });
  if (!spin_until_set(shared->ready, Clock::now() + 5s)) {
    *error = "consumer never started";
    return 0;
  }
  RingProducer<Descriptor, 4096> out(&shared->ring);
  const auto start = Clock::now();
  const auto stop_at = start + kThroughputTime;
  const auto give_up = stop_at + 5s;  // a consumer that stopped leaves the ring full
  auto push = [&](const Descriptor& d) {
    for (uint64_t spins = 1; !out.try_push(d); ++spins) {
      if (spins % 4096 == 0 && Clock::now() > give_up) return false;
      cpu_relax();
    }
    return true;
  };
  uint64_t seq = 0;
  bool pushed = true;
  while (pushed && Clock::now() < stop_at) {
    for (uint32_t i = 0; pushed && i < 4096; ++i) {
      pushed = push(descriptor(seq));
      if (++seq % batch == 0) out.wake_consumer();
    }
  }
  pushed = pushed && push(descriptor(seq, kStop));
  out.wake_consumer();
  const bool finished = pushed && spin_until_set(shared->done, Clock::now() + 5s);
  const auto elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const ChildResult result = child.wait(Clock::now() + 5s);
  if (!finished || !result.ok || shared->consumed != seq) {
    *error = "consumer failed: " + result.why;
    return 0;
  }
  return static_cast<double>(seq) / elapsed;
}

// ---- (b) ring round trips ------------------------------------------------

enum class WaitMode { kBusy, kSpinThenFutex, kFutexOnly };

struct EchoShared {
  EchoRing requests;  // parent → child
  EchoRing replies;   // child → parent
  alignas(64) std::atomic<uint32_t> ready{0};
};

bool wait_for(RingConsumer<Descriptor, 1024>& in, WaitMode mode, Clock::time_point deadline) {
  switch (mode) {
    case WaitMode::kSpinThenFutex:
      return in.wait(deadline);
    case WaitMode::kFutexOnly:
      return in.wait(deadline, 0);
    case WaitMode::kBusy:
      break;
  }
  for (uint64_t i = 0; in.front() == nullptr; ++i) {
    if (i % 4096 == 0 && Clock::now() > deadline) return false;
    cpu_relax();
  }
  return true;
}

int echo_until_stop(EchoShared* shared, WaitMode mode) {
  RingConsumer<Descriptor, 1024> in(&shared->requests);
  RingProducer<Descriptor, 1024> out(&shared->replies);
  shared->ready.store(1, std::memory_order_release);
  for (;;) {
    if (!wait_for(in, mode, Clock::now() + kChildDeadline)) return 2;
    const Descriptor d = *in.front();
    in.pop();
    if (d.kind == kStop) return 0;
    while (!out.try_push(d)) cpu_relax();  // one in flight: never full
    out.wake_consumer();
  }
}

Latency ring_round_trips(const Cpus& cpus, WaitMode mode) {
  Segment segment = Segment::create(sizeof(EchoShared), "bench");
  auto* shared = new (segment.data()) EchoShared;
  Child child(cpus, [&] { return echo_until_stop(shared, mode); });
  Latency latency;
  if (!spin_until_set(shared->ready, Clock::now() + 5s)) {
    latency.error = "echo never started";
    return latency;
  }
  RingProducer<Descriptor, 1024> out(&shared->requests);
  RingConsumer<Descriptor, 1024> in(&shared->replies);
  latency = summarize(sample_round_trips([&](uint64_t seq) {
    if (!out.try_push(descriptor(seq))) return false;
    out.wake_consumer();
    if (!wait_for(in, mode, Clock::now() + 5s) || in.front()->seq != seq) return false;
    in.pop();
    return true;
  }));
  const bool stop_sent = out.try_push(descriptor(0, kStop));  // one round trip at a time: the ring is empty
  out.wake_consumer();
  const ChildResult result = child.wait(Clock::now() + 5s);
  if (!stop_sent) {
    latency.error = "echo failed: its request ring was full, the stop could not be sent";
  } else if (latency.count == 0 || !result.ok) {
    latency.error = "echo failed: " + result.why;
  }
  return latency;
}

// The floor under any shared-memory round trip on this machine: one atomic
// each way, no ring, no slots, no fences beyond acquire/release.
struct PingPongShared {
  alignas(64) std::atomic<uint64_t> ping{0};
  alignas(64) std::atomic<uint64_t> pong{0};
};

bool spin_until_equal(const std::atomic<uint64_t>& word, uint64_t value, Clock::time_point deadline) {
  for (uint64_t i = 0; word.load(std::memory_order_acquire) != value; ++i) {
    if (i % 4096 == 0 && Clock::now() > deadline) return false;
    cpu_relax();
  }
  return true;
}

Latency atomic_round_trips(const Cpus& cpus) {
  Segment segment = Segment::create(sizeof(PingPongShared), "bench");
  auto* shared = new (segment.data()) PingPongShared;
  constexpr uint64_t kStopValue = ~uint64_t{0};
  Child child(cpus, [&] {
    for (uint64_t seen = 0;;) {
      const auto deadline = Clock::now() + kChildDeadline;
      uint64_t v;
      for (uint64_t i = 0; (v = shared->ping.load(std::memory_order_acquire)) == seen; ++i) {
        if (i % 4096 == 0 && Clock::now() > deadline) return 2;
        cpu_relax();
      }
      if (v == kStopValue) return 0;
      shared->pong.store(v, std::memory_order_release);
      seen = v;
    }
  });
  Latency latency = summarize(sample_round_trips([&](uint64_t seq) {
    shared->ping.store(seq + 1, std::memory_order_release);
    return spin_until_equal(shared->pong, seq + 1, Clock::now() + 5s);
  }));
  shared->ping.store(kStopValue, std::memory_order_release);
  const ChildResult result = child.wait(Clock::now() + 5s);
  if (latency.count == 0 || !result.ok) latency.error = "echo failed: " + result.why;
  return latency;
}

// ---- (c) socketpair and pipes --------------------------------------------

bool write_full(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool read_full(int fd, void* data, size_t size) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // 0: the other side closed
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The child echoes 32-byte messages from `in` to `out` until EOF. The parent
// talks on its own pair of ends; each side closes the other's ends, so a dead
// peer is an EOF, never a hang.
Latency fd_round_trips(const Cpus& cpus, int parent_in, int parent_out, int child_in,
                       int child_out) {
  Child child(cpus, [&] {
    close(parent_in);
    close(parent_out);
    Descriptor d;
    while (read_full(child_in, &d, sizeof d)) {
      if (!write_full(child_out, &d, sizeof d)) return 2;
    }
    return 0;
  });
  close(child_in);
  if (child_out != child_in) close(child_out);
  Latency latency = summarize(sample_round_trips([&](uint64_t seq) {
    Descriptor d = descriptor(seq);
    return write_full(parent_out, &d, sizeof d) && read_full(parent_in, &d, sizeof d) &&
           d.seq == seq;
  }));
  close(parent_out);  // the child's EOF
  if (parent_in != parent_out) close(parent_in);
  const ChildResult result = child.wait(Clock::now() + 5s);
  if (latency.count == 0 || !result.ok) latency.error = "echo failed: " + result.why;
  return latency;
}

Latency socketpair_round_trips(const Cpus& cpus) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return Latency{0, 0, 0, "socketpair() failed"};
  }
  return fd_round_trips(cpus, sv[0], sv[0], sv[1], sv[1]);
}

Latency pipe_round_trips(const Cpus& cpus) {
  int to_child[2];
  int to_parent[2];
  if (pipe2(to_child, O_CLOEXEC) != 0) return Latency{0, 0, 0, "pipe2() failed"};
  if (pipe2(to_parent, O_CLOEXEC) != 0) {
    close(to_child[0]);
    close(to_child[1]);
    return Latency{0, 0, 0, "pipe2() failed"};
  }
  return fd_round_trips(cpus, to_parent[0], to_child[1], to_child[0], to_parent[1]);
}

// ---- (d) idle consumer ---------------------------------------------------

// Percent of one core a consumer uses while it waits on an empty ring for
// kIdleTime, calling wait() with deadlines `slice` apart (its rusage).
double idle_cpu_percent(const Cpus& cpus, std::chrono::milliseconds slice, std::string* error) {
  Segment segment = Segment::create(sizeof(EchoRing), "bench");
  auto* ring = new (segment.data()) EchoRing;
  const auto start = Clock::now();
  Child child(cpus, [&] {
    RingConsumer<Descriptor, 1024> in(ring);
    const auto end = Clock::now() + kIdleTime;
    for (auto now = Clock::now(); now < end; now = Clock::now()) {
      if (in.wait(std::min(end, now + slice))) return 2;
    }
    return 0;
  });
  const ChildResult result = child.wait(Clock::now() + 10s);
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  if (!result.ok) *error = result.why;
  const double cpu = static_cast<double>(result.usage.ru_utime.tv_sec + result.usage.ru_stime.tv_sec) +
                     static_cast<double>(result.usage.ru_utime.tv_usec + result.usage.ru_stime.tv_usec) / 1e6;
  return 100.0 * cpu / wall;
}

// ---- report ----------------------------------------------------------------

double clock_read_ns() {
  constexpr int kReads = 1000000;
  for (int i = 0; i < kReads; ++i) (void)Clock::now();  // warm up
  const auto start = Clock::now();
  for (int i = 0; i < kReads; ++i) (void)Clock::now();
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kReads;
}

void print_latency(const char* name, const Latency& l) {
  if (!l.error.empty()) {
    std::printf("  %-44s FAILED: %s\n", name, l.error.c_str());
    return;
  }
  std::printf("  %-44s %8zu %10.2f %10.2f\n", name, l.count, l.p50_ns / 1000, l.p99_ns / 1000);
}

void print_throughput(const char* name, double rate, const std::string& error) {
  if (!error.empty()) {
    std::printf("  %-44s FAILED: %s\n", name, error.c_str());
    return;
  }
  std::printf("  %-44s %8.2f M/s  (%.1f ns each)\n", name, rate / 1e6, 1e9 / rate);
}

void print_idle(const char* name, double percent, const std::string& error) {
  if (!error.empty()) {
    std::printf("  %-44s FAILED: %s\n", name, error.c_str());
    return;
  }
  std::printf("  %-44s %8.3f %% of a core\n", name, percent);
}

void print_ratio(const char* name, const Latency& a, const Latency& b) {
  if (!a.error.empty() || !b.error.empty() || b.p50_ns <= 0) {
    std::printf("  %-44s n/a\n", name);
    return;
  }
  std::printf("  %-44s %8.4f   (inverse %.1f)\n", name, a.p50_ns / b.p50_ns, b.p50_ns / a.p50_ns);
}

}  // namespace

int main() {
  const Cpus cpus = pick_cpus();
  pin(cpus.parent);
  if (cpus.child >= 0) {
    std::printf("corepool-ring-bench: 32-byte descriptors, parent on cpu %d, child on cpu %d\n",
                cpus.parent, cpus.child);
  } else {
    std::printf("corepool-ring-bench: 32-byte descriptors, ONE cpu: nothing pinned, "
                "spinning rows share the core\n");
  }
  std::printf("steady_clock read: %.1f ns (one read per round-trip sample)\n\n", clock_read_ns());
  const auto start = Clock::now();

  std::printf("(a) one-way, producer process -> busy consumer process\n");
  std::string error;
  double rate = ring_throughput(cpus, 1, &error);
  print_throughput("ring, try_push + wake_consumer each", rate, error);
  bool failed = !error.empty();
  error.clear();
  rate = ring_throughput(cpus, 32, &error);
  print_throughput("ring, try_push x32 + one wake_consumer", rate, error);
  failed = failed || !error.empty();

  std::printf("\n(b, c) round trip, parent -> child -> parent   %8s %10s %10s\n", "count",
              "p50 us", "p99 us");
  const Latency floor = atomic_round_trips(cpus);
  print_latency("bare atomic ping-pong (floor, no ring)", floor);
  const Latency busy = ring_round_trips(cpus, WaitMode::kBusy);
  print_latency("ring, both sides spinning (busy)", busy);
  const Latency spin_then_futex = ring_round_trips(cpus, WaitMode::kSpinThenFutex);
  print_latency("ring, wait(): spin 2000 then futex", spin_then_futex);
  const Latency asleep = ring_round_trips(cpus, WaitMode::kFutexOnly);
  print_latency("ring, wait(spin 0): futex (asleep)", asleep);
  const Latency unix_socket = socketpair_round_trips(cpus);
  print_latency("unix socketpair (SOCK_STREAM)", unix_socket);
  const Latency pipes = pipe_round_trips(cpus);
  print_latency("pipe pair", pipes);

  std::printf("\n(d) idle consumer: wait() on an empty ring for 1 s, default spin\n");
  error.clear();
  double idle = idle_cpu_percent(cpus, 1000ms, &error);
  print_idle("one wait() to a 1 s deadline", idle, error);
  failed = failed || !error.empty();
  error.clear();
  idle = idle_cpu_percent(cpus, 10ms, &error);
  print_idle("wait() in 10 ms slices (100 deadlines)", idle, error);
  failed = failed || !error.empty();

  std::printf("\nratios (p50 / p50)\n");
  print_ratio("ring busy / unix socket", busy, unix_socket);
  print_ratio("ring busy / bare atomic floor", busy, floor);
  print_ratio("ring asleep / unix socket", asleep, unix_socket);
  print_ratio("ring spin-then-futex / unix socket", spin_then_futex, unix_socket);
  print_ratio("pipe / unix socket", pipes, unix_socket);
  std::printf("\ntotal %.1f s\n", std::chrono::duration<double>(Clock::now() - start).count());

  failed = failed || !busy.error.empty() || !asleep.error.empty() ||
                      !spin_then_futex.error.empty() || !unix_socket.error.empty() ||
                      !pipes.error.empty();
  return failed ? 1 : 0;
}
