// The open-file limit of the serve process, raised once at start to what
// serve.max_connections needs (ServeProcess::start()).
#pragma once

namespace corepool {

// Raises the soft RLIMIT_NOFILE to the hard limit and warns when that is
// still below `max_connections` + 64 (listeners, workers' fds, logs).
void raise_fd_limit(int max_connections);

}  // namespace corepool
