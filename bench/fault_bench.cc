// corepool-fault-bench: what a page fault costs on this machine, against
// mapping the same pages in one call (MADV_POPULATE_READ / _WRITE). Process
// mode pays faults that thread mode does not: fork() copies no page-table
// entries of a shared mapping (a worker's weights and channel), and after it
// every page either side writes first is a copy-on-write fault (the
// supervisor's reused heap, a worker's inherited one). On bare metal a fault
// is well under a microsecond; under some hypervisors it is ten or more
// (bench/RESULTS.md), which is what makes a worker's start and the first
// calls of a new process dear there. Prints microseconds per 4 KiB page, the
// best of --reps runs of each case.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

#include "bench/tool_main.h"

namespace corepool {
namespace {

constexpr size_t kPage = 4096;

double seconds_of(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A fresh mapping, unmapped when the scope ends.
struct Mapping {
  char* p;
  size_t bytes;
  Mapping(size_t n, int flags) : bytes(n) {
    void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + std::strerror(errno));
    p = static_cast<char*>(m);
    // 4 KiB pages, as in the cases this stands for, even where THP is "always".
    ::madvise(m, n, MADV_NOHUGEPAGE);
  }
  ~Mapping() { ::munmap(p, bytes); }
  void touch(char value) const {
    for (size_t i = 0; i < bytes; i += kPage) p[i] = value;
  }
  // Reads one byte a page; the sum keeps the reads from being optimised away.
  int read_all() const {
    int sum = 0;
    for (size_t i = 0; i < bytes; i += kPage) sum += static_cast<volatile char*>(p)[i];
    return sum;
  }
};

void populate(const Mapping& m, int advice) {
  if (::madvise(m.p, m.bytes, advice) != 0) {
    throw std::runtime_error(std::string("madvise(MADV_POPULATE_*): ") + std::strerror(errno) +
                             " (Linux 5.14 or later has it)");
  }
}

// Runs `fn` in a forked child and returns the seconds it measured there.
double in_child(const std::function<double()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const double s = fn();
    ssize_t ignored = ::write(fds[1], &s, sizeof s);
    (void)ignored;
    ::_exit(0);
  }
  ::close(fds[1]);
  double s = -1;
  const ssize_t got = ::read(fds[0], &s, sizeof s);
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  if (got != sizeof s) throw std::runtime_error("the child died before it reported");
  return s;
}

// Seconds for the parent to write every page while a child still shares them.
double cow_in_parent(const Mapping& m) {
  int go[2];
  if (::pipe(go) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {  // holds the pages until the parent closes the pipe
    ::close(go[1]);
    char c;
    ssize_t ignored = ::read(go[0], &c, 1);
    (void)ignored;
    ::_exit(0);
  }
  ::close(go[0]);
  const double s = seconds_of([&] { m.touch(3); });
  ::close(go[1]);
  ::waitpid(pid, nullptr, 0);
  return s;
}

int run_main(int argc, char** argv) {
  int mib = 64, reps = 5;
  CLI::App app{"corepool-fault-bench: a page fault's cost here, against MADV_POPULATE, in us per 4 KiB page"};
  app.add_option("--mib", mib, "the size of each mapping (MiB)")->check(CLI::Range(1, 4096));
  app.add_option("--reps", reps, "runs of each case; the best is printed")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  const size_t bytes = size_t(mib) << 20;
  const double pages = double(bytes / kPage);
  struct Case {
    const char* what;
    std::function<double()> run;
  };
  const Case cases[] = {
      {"first write, private anonymous (a fault a page)",
       [&] {
         const Mapping m(bytes, MAP_PRIVATE);
         return seconds_of([&] { m.touch(1); });
       }},
      {"MADV_POPULATE_WRITE, private anonymous (one call)",
       [&] {
         const Mapping m(bytes, MAP_PRIVATE);
         return seconds_of([&] { populate(m, MADV_POPULATE_WRITE); });
       }},
      {"copy-on-write in the parent, a child alive",
       [&] {
         const Mapping m(bytes, MAP_PRIVATE);
         m.touch(1);
         return cow_in_parent(m);
       }},
      {"first read of a shared mapping in a forked child",
       [&] {
         const Mapping m(bytes, MAP_SHARED);
         m.touch(1);
         return in_child([&] { return seconds_of([&] { (void)m.read_all(); }); });
       }},
      {"MADV_POPULATE_READ of it in a forked child",
       [&] {
         const Mapping m(bytes, MAP_SHARED);
         m.touch(1);
         return in_child([&] { return seconds_of([&] { populate(m, MADV_POPULATE_READ); }); });
       }},
  };
  std::printf("page faults, %d MiB a mapping, best of %d:\n", mib, reps);
  for (const Case& c : cases) {
    double best = 1e9;
    for (int r = 0; r < reps; ++r) best = std::min(best, c.run());
    std::printf("  %-52s %7.3f us a page\n", c.what, best / pages * 1e6);
  }
  return 0;
}

}  // namespace
}  // namespace corepool

int main(int argc, char** argv) {
  return corepool::tool_main("corepool-fault-bench", corepool::run_main, argc, argv);
}
