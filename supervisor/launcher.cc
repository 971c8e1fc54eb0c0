// `corepool`: the launcher. It sets the environment corepool-engine (the
// program itself, which links LibTorch) would otherwise re-execute itself
// with to get jemalloc (supervisor/pool/allocator.h), then executes it once:
// same pid, same argv, so systemd's notify socket, watchdog and socket
// activation see one process. Without it every start loaded LibTorch twice:
// 0.84 s of a 2.6 s `corepool batch` run on 10 minutes of audio (bench-all
// file 20, bench/RESULTS.md). This file links no LibTorch, so it starts in
// milliseconds.
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "supervisor/pool/allocator.h"
#include "worker/exit_codes.h"

namespace {

// The engine next to this launcher (the build tree; a bin/ install), or in
// ../libexec/corepool/ (the Debian package: /usr/bin and /usr/libexec).
std::string find_engine(std::string& looked) {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  const std::string path(self, static_cast<size_t>(n));
  const std::string dir = path.substr(0, path.rfind('/'));
  for (const std::string& candidate : {dir + "/corepool-engine", dir + "/../libexec/corepool/corepool-engine"}) {
    looked += (looked.empty() ? "" : ", ") + candidate;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

int main(int, char** argv) {
  std::string looked;
  const std::string engine = find_engine(looked);
  if (engine.empty()) {
    std::fprintf(stderr, "corepool: corepool-engine not found (looked for %s): a broken install?\n",
                 looked.empty() ? "it next to /proc/self/exe" : looked.c_str());
    return corepool::exit_status(corepool::ExitCode::kEngineNotFound);
  }
  corepool::set_launch_environment(argv);
  ::execv(engine.c_str(), argv);
  std::fprintf(stderr, "corepool: cannot execute %s: %s\n", engine.c_str(), std::strerror(errno));
  return corepool::exit_status(corepool::ExitCode::kEngineNotRunnable);
}
