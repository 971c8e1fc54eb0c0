#include "supervisor/serve/fd_limit.h"

#include <sys/resource.h>

#include <spdlog/spdlog.h>

namespace corepool {

// Keep-alive connections cost one fd each; the default soft limit (often 1024)
// would cap a server configured for thousands.
void raise_fd_limit(int max_connections) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
    ::getrlimit(RLIMIT_NOFILE, &lim);
  }
  if (lim.rlim_cur < static_cast<rlim_t>(max_connections) + 64) {
    spdlog::warn("open-file limit {} is below serve.max_connections {} + 64: connections past it will fail "
                 "(raise LimitNOFILE= or ulimit -n)", lim.rlim_cur, max_connections);
  }
}

}  // namespace corepool
